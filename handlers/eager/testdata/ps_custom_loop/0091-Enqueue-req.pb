	ÅÁÎ~Ó«+ŸœReadVariableOp*
dtype02%/job:ps/replica:0/task:0/device:CPU:0RT
R%/job:ps/replica:0/task:0/device:CPU:0"%/job:ps/replica:0/task:0/device:CPU:0(