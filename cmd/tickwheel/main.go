// Command tickwheel runs the tickwheel timer server, and pokes a running one.
//
//	tickwheel [serve] [-config FILE] [-addr HOST:PORT] [-tick DURATION] [-admin-token T] [-frozen] [-start-tick N]
//	tickwheel COMMAND [-addr HOST:PORT] [-token T] [-json] ARGS...
//
// With no command it serves on 127.0.0.1:7420 with embedded defaults; flags
// override the config file, and SIGINT or SIGTERM shut it down gracefully.
// The commands (add, cancel, get, list, watch, ff, freeze, resume, speed,
// stats, ping) talk to a running server: `tickwheel help` lists them.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/tickwheel/tickwheel/server"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to the server or a command and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") && args[0] != "serve" {
		return runCommand(args[0], args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	if err := serve(args, stdout); err != nil {
		fmt.Fprintln(stderr, "tickwheel:", err)
		return 1
	}
	return 0
}

func serve(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tickwheel", flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML config file (see configs/tickwheel.yaml)")
	addr := fs.String("addr", "", "listen address (default 127.0.0.1:7420)")
	tick := fs.Duration("tick", 0, "tw-time tick duration (default 10ms)")
	adminToken := fs.String("admin-token", "", "token that grants admin ops (default: admin only from loopback)")
	frozen := fs.Bool("frozen", false, "start with tw-time frozen (moved only by admin fast-forward)")
	startTick := fs.Uint64("start-tick", 0, "tw-time at start (default: the current Unix time in ticks)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (pprof) to this file until shutdown")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg server.Config
	if *configPath != "" {
		var err error
		if cfg, err = server.LoadConfig(*configPath); err != nil {
			return err
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "addr":
			cfg.Addr = *addr
		case "tick":
			cfg.Tick = *tick
		case "admin-token":
			cfg.AdminToken = *adminToken
		case "frozen":
			cfg.Frozen = *frozen
		case "start-tick":
			cfg.StartTick = *startTick
		}
	})
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	srv, err := server.New(cfg, log)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	if err := srv.Start(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tickwheel listening on %s\n", srv.Addr())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case <-srv.Done():
		return fmt.Errorf("server stopped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Stop(ctx)
}
