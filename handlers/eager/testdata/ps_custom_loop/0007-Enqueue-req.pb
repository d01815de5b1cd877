	ÅÁÎ~Ó«+®"«
¨
Ï
S__wrapped__StatelessRandomUniformV2_device_/job:chief/replica:0/task:0/device:CPU:0
shape"Tshape
key
counter
alg
output"dtype"
dtypetype0:
2"
Tshapetype0:
2	¦
StatelessRandomUniformV2StatelessRandomUniformV2shape:0key:0	counter:0alg:0"(/job:chief/replica:0/task:0/device:CPU:0*
TshapeJTshape*
dtypeJdtype"+
output!StatelessRandomUniformV2:output:0