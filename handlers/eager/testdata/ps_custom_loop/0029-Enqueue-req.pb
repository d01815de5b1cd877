	ÅÁÎ~Ó«+ª"§
¤
™
?__wrapped__Fill_device_/job:chief/replica:0/task:0/device:CPU:0
dims"
index_type

value"T
output"T"	
Ttype"

index_typetype0:
2	m
FillFilldims:0value:0"(/job:chief/replica:0/task:0/device:CPU:0*
TJT*

index_typeJ
index_type"
outputFill:output:0