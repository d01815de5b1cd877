	еан~с╚+з"в
т
z
>__wrapped__Mul_device_/job:chief/replica:0/task:0/device:CPU:0
x"T
y"T
z"T"
Ttype:
2	░H
MulMulx:0y:0"(/job:chief/replica:0/task:0/device:CPU:0*
TJT"
zMul:z:0