package flags

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/rpc/cluster"
)

// TestWaitReports: a wait for --registry_dir's tasks says every
// WaitReportEvery which tasks are not registered yet, and names fewer as
// they register; the wait still ends at --cluster_wait.
func TestWaitReports(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		var reports []string
		c := Cluster{RegistryDir: dir, WaitTimeout: 12 * time.Second, Report: func(msg string) { reports = append(reports, msg) }}
		done := make(chan error)
		go func() {
			_, err := c.wait(context.Background(), 1, 2)
			done <- err
		}()
		time.Sleep(WaitReportEvery + time.Second)
		if err := cluster.Register(dir, "ps", 0, map[string]string{"grpc": "127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
		err := <-done
		if !errors.Is(err, cluster.ErrIncomplete) {
			t.Fatalf("wait: %v, want ErrIncomplete", err)
		}
		want := []string{
			"waiting for 3 of 3 tasks to register in " + dir + " (5s of --cluster_wait 12s): ps:0, worker:0, worker:1",
			"waiting for 2 of 3 tasks to register in " + dir + " (10s of --cluster_wait 12s): worker:0, worker:1",
		}
		if strings.Join(reports, "\n") != strings.Join(want, "\n") {
			t.Errorf("reports:\n%s\nwant:\n%s", strings.Join(reports, "\n"), strings.Join(want, "\n"))
		}
	})
}
