
b6cfbb4d71870fbd<ps"0‚-º*

standalone/job:worker/replica:0/task:0*grpc*/job:worker/replica:0/task:00Š€Ê·å¼ÊÔb