	ÅÁÎ~Ó«+ƒ"€
ý
™
W__wrapped__StatelessRandomGetKeyCounter_device_/job:chief/replica:0/task:0/device:CPU:0
seed"Tseed
key
counter"
Tseedtype0	:
2	€
StatelessRandomGetKeyCounterStatelessRandomGetKeyCounterseed:0"(/job:chief/replica:0/task:0/device:CPU:0*
TseedJTseed")
key"StatelessRandomGetKeyCounter:key:0"1
counter&StatelessRandomGetKeyCounter:counter:0