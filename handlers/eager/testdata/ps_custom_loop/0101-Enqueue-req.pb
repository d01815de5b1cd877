	еан~с╚+B
__inference_step_90