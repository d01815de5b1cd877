	ÅÁÎ~Ó«+¢ŸVarHandleOp*
shape:*5
shared_name&$cd2c89b7-88b7-44c8-ad83-06c2a9158347*

debug_nameb/*
dtype02%/job:ps/replica:0/task:0/device:CPU:0