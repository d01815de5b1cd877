	еан~с╚+А"ч
ш
i
C__wrapped__Identity_device_/job:chief/replica:0/task:0/device:CPU:0

input"T
output"T"	
TtypeQ
IdentityIdentityinput:0"(/job:chief/replica:0/task:0/device:CPU:0*
TJT"
outputIdentity:output:0