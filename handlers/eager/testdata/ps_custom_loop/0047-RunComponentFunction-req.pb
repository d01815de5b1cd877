	ÅÁÎ~Ó«+öf__wrapped__Identity_device_/job:chief/replica:0/task:0/device:CPU:0_partitioned_17352570056396438513_02%/job:ps/replica:0/task:0/device:CPU:08@£ÄÇžÆý²ÞêHRT
R
%/job:ps/replica:0/task:0/device:CPU:0"%/job:ps/replica:0/task:0/device:CPU:0(