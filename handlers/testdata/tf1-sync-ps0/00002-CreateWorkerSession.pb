
8b583d0e6fc3a483<ps"0‚-º*

standalone/job:worker/replica:0/task:0*grpc*/job:worker/replica:0/task:00Á©€æð¢Ï£d