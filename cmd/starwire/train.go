package main

import (
	"context"
	"fmt"
	"io"
)

func trainCmd(ctx context.Context, args []string, stdout io.Writer) error {
	return fmt.Errorf("train: not built yet")
}

func serveCmd(ctx context.Context, args []string, stdout io.Writer) error {
	return fmt.Errorf("serve: not built yet")
}
