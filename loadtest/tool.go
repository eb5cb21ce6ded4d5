package loadtest

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"
)

// ToolReport is what a long fault run (Soak, ClusterNemesis) reports.
type ToolReport interface {
	Print(w io.Writer)
	Failed() bool // something of zero tolerance happened
}

// RunTool runs one of the fault commands (cmd/soak, cmd/cluster) and
// returns its exit code. It puts the servers' data in dir, or in a
// temporary directory named after prefix that it removes unless the run
// failed; it writes the servers' log to serverLog when it is not "";
// and it runs run within duration plus 5 minutes, then prints the report
// and, when it failed, where the data was kept. It returns 0 when the run
// passed, 1 when it failed or could not run.
func RunTool(prefix, dir, serverLog string, duration time.Duration,
	run func(ctx context.Context, dir string, serverLog io.Writer) (ToolReport, error)) int {
	keep := dir != ""
	if dir == "" {
		d, err := os.MkdirTemp("", prefix)
		if err != nil {
			log.Print(err)
			return 1
		}
		defer func() {
			if !keep {
				os.RemoveAll(d)
			}
		}()
		dir = d
	}
	var logw io.Writer
	if serverLog != "" {
		f, err := os.Create(serverLog)
		if err != nil {
			log.Print(err)
			return 1
		}
		defer f.Close()
		logw = f
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration+5*time.Minute)
	defer cancel()
	rep, err := run(ctx, dir, logw)
	if err != nil {
		log.Print(err)
		return 1
	}
	rep.Print(os.Stdout)
	if rep.Failed() {
		keep = true
		fmt.Printf("the data directories are kept: %s\n", dir)
		return 1
	}
	return 0
}
