	еан~с╚+ЗВAssignVariableOp*
dtype02%/job:ps/replica:0/task:0/device:CPU:0RT
R%/job:ps/replica:0/task:0/device:CPU:0"%/job:ps/replica:0/task:0/device:CPU:0(RW
U%/job:ps/replica:0/task:0/device:CPU:0"(/job:chief/replica:0/task:0/device:CPU:0(