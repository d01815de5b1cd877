	ÅÁÎ~Ó«+ñ5__inference_step_90_partitioned_2377885647150275639_12%/job:ps/replica:0/task:0/device:CPU:08@ÆÐ¤Æ«†ýüºHRT
R%/job:ps/replica:0/task:0/device:CPU:0"%/job:ps/replica:0/task:0/device:CPU:0(RT
R%/job:ps/replica:0/task:0/device:CPU:0"%/job:ps/replica:0/task:0/device:CPU:0(RT
R%/job:ps/replica:0/task:0/device:CPU:0"%/job:ps/replica:0/task:0/device:CPU:0(