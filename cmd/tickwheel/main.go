// Command tickwheel runs the tickwheel timer server.
//
//	tickwheel [-config FILE] [-addr HOST:PORT] [-tick DURATION] [-admin-token T] [-frozen]
//
// With no flags it serves on 127.0.0.1:7420 with embedded defaults. Flags
// override the config file. SIGINT or SIGTERM shut it down gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tickwheel/tickwheel/server"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tickwheel:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("tickwheel", flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML config file (see configs/tickwheel.yaml)")
	addr := fs.String("addr", "", "listen address (default 127.0.0.1:7420)")
	tick := fs.Duration("tick", 0, "tw-time tick duration (default 10ms)")
	adminToken := fs.String("admin-token", "", "token that grants admin ops (default: admin only from loopback)")
	frozen := fs.Bool("frozen", false, "start with tw-time frozen (moved only by admin fast-forward)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
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
	if err := srv.Start(); err != nil {
		return err
	}
	fmt.Printf("tickwheel listening on %s\n", srv.Addr())

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
