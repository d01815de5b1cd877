	еан~с╚+в"т
я
w
>__wrapped__Sub_device_/job:chief/replica:0/task:0/device:CPU:0
x"T
y"T
z"T"
Ttype:
2	H
SubSubx:0y:0"(/job:chief/replica:0/task:0/device:CPU:0*
TJT"
zSub:z:0