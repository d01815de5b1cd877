
r/job:worker/replica:0/task:0/device:CPU:0;4e81e99b76a69859;/job:ps/replica:0/task:0/device:CPU:0;edge_37_mul_2;0:0";Õ=