
96e8e641398b815c<ps"0‚-º*

standalone/job:worker/replica:0/task:1*grpc*/job:worker/replica:0/task:10Ô‰á—…ÊâªÕ