	ÅÁÎ~Ó«+¦£VarHandleOp*

debug_namew/*
shape
:*5
shared_name&$cd2c89b7-88b7-44c8-ad83-06c2a9158347*
dtype02%/job:ps/replica:0/task:0/device:CPU:0