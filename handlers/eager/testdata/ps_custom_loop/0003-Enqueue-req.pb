	еан~с╚+Н"К
Х
m
G__wrapped____EagerConst_device_/job:chief/replica:0/task:0/device:CPU:0

input"T
output"T"	
TtypeW
_EagerConst_EagerConstinput:0"(/job:chief/replica:0/task:0/device:CPU:0*
TJT"
output_EagerConst:output:0