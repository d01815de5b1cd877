	еан~с╚+Е"Б
ъ

@__wrapped__AddV2_device_/job:chief/replica:0/task:0/device:CPU:0
x"T
y"T
z"T"
Ttype:
2	─░L
AddV2AddV2x:0y:0"(/job:chief/replica:0/task:0/device:CPU:0*
TJT"
z	AddV2:z:0