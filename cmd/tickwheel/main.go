// Command tickwheel runs the tickwheel timer server, and pokes a running one.
//
//	tickwheel [serve] [-config FILE] [-addr HOST:PORT] [-tick DURATION] [-frozen] [-start-tick N]
//	          [-data-dir DIR] [-fsync always|everysec|no] [-downtime catch-up|pause] [-repair]
//	          [-admin-token-file FILE] [-client-token-file FILE] [-insecure] [-http-addr HOST:PORT]
//	tickwheel COMMAND [-addr HOST:PORT] [-token T | -token-file FILE] [-data-dir DIR] [-json] ARGS...
//
// With no command it serves on 127.0.0.1:7420 with embedded defaults,
// keeping its state in ./tickwheel-data (-data-dir "" keeps it in memory
// only); flags override the config file, and SIGINT or SIGTERM shut it down
// gracefully, with a last snapshot. Beside it, the operator HTTP listener
// (metrics, /healthz, /readyz, pprof, a status page: docs/OPERATIONS.md)
// serves on 127.0.0.1:7421; -http-addr "" turns it off.
// The admin token comes from -admin-token(-file), else $TICKWHEEL_ADMIN_TOKEN,
// else the config file, else <data dir>/admin.token, made at first start.
// The commands (add, cancel, get, list, watch, ff, freeze, resume, speed,
// stats, ping) talk to a running server: `tickwheel help` lists them. On the
// server's machine they find its admin token by themselves.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/tickwheel/tickwheel/operator"
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
	if err := serve(args, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "tickwheel:", err)
		return 1
	}
	return 0
}

// Environment variables that carry tokens, so they do not show in ps.
const (
	envAdminToken  = "TICKWHEEL_ADMIN_TOKEN"
	envClientToken = "TICKWHEEL_CLIENT_TOKEN"
)

// serveFlags are the serve flags that are not server settings.
type serveFlags struct {
	logLevel   string
	cpuProfile string
}

// serveConfig builds the server config from the config file, the token
// environment variables and the flags, in increasing precedence: a flag
// beats the environment, which beats the config file. Each token is taken
// from one source as a whole: -admin-token or -admin-token-file, else
// $TICKWHEEL_ADMIN_TOKEN, else admin_token or admin_token_file (else the
// server uses <data_dir>/admin.token); likewise -client-token-file, else
// $TICKWHEEL_CLIENT_TOKEN, else client_token or client_token_file.
func serveConfig(args []string, getenv func(string) string, stderr io.Writer) (server.Config, serveFlags, error) {
	var sf serveFlags
	fs := flag.NewFlagSet("tickwheel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "YAML config file (see configs/tickwheel.yaml)")
	addr := fs.String("addr", "", "listen address (default 127.0.0.1:7420)")
	tick := fs.Duration("tick", 0, "tw-time tick duration (default 10ms)")
	adminToken := fs.String("admin-token", "", "admin token (visible in ps: prefer -admin-token-file or $"+envAdminToken+")")
	adminTokenFile := fs.String("admin-token-file", "", "file holding the admin token (default: <data dir>/admin.token, made at first start)")
	clientTokenFile := fs.String("client-token-file", "", "file holding the token every client must give (or $"+envClientToken+")")
	dataDir := fs.String("data-dir", "", "directory for the log, snapshots and admin.token (default ./"+server.DefaultDataDir+`; "" keeps timers in memory only)`)
	fsync := fs.String("fsync", "", "when the log reaches the disk: always, everysec (default) or no")
	downtime := fs.String("downtime", "", "tw-time while the server was down: catch-up (default) or pause")
	repair := fs.Bool("repair", false, "start even if the log has a bad record in its middle, cutting it there")
	insecure := fs.Bool("insecure", false, "allow listening beyond loopback with no client token")
	frozen := fs.Bool("frozen", false, "start with tw-time frozen (moved only by admin fast-forward)")
	startTick := fs.Uint64("start-tick", 0, "tw-time at start (default: the current Unix time in ticks)")
	httpAddr := fs.String("http-addr", "", `operator HTTP listener: metrics, health, pprof, status page (default `+operator.DefaultAddr+`; "" or "off" turns it off)`)
	fs.StringVar(&sf.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&sf.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) to this file until shutdown")
	if err := fs.Parse(args); err != nil {
		return server.Config{}, sf, err
	}
	var cfg server.Config
	if *configPath != "" {
		var err error
		if cfg, err = server.LoadConfig(*configPath); err != nil {
			return cfg, sf, err
		}
	}
	if v := getenv(envAdminToken); v != "" {
		cfg.AdminToken, cfg.AdminTokenFile = v, ""
	}
	if v := getenv(envClientToken); v != "" {
		cfg.ClientToken, cfg.ClientTokenFile = v, ""
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["admin-token"] && set["admin-token-file"] {
		return cfg, sf, errors.New("-admin-token and -admin-token-file: give one")
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "addr":
			cfg.Addr = *addr
		case "tick":
			cfg.Tick = *tick
		case "admin-token":
			cfg.AdminToken, cfg.AdminTokenFile = *adminToken, ""
		case "admin-token-file":
			cfg.AdminToken, cfg.AdminTokenFile = "", *adminTokenFile
		case "client-token-file":
			cfg.ClientToken, cfg.ClientTokenFile = "", *clientTokenFile
		case "data-dir":
			cfg.DataDir = *dataDir
			if *dataDir == "" {
				cfg.Persistence = "off"
			}
		case "fsync":
			cfg.Fsync = *fsync
		case "downtime":
			cfg.Downtime = *downtime
		case "repair":
			cfg.Repair = *repair
		case "insecure":
			cfg.Insecure = *insecure
		case "frozen":
			cfg.Frozen = *frozen
		case "start-tick":
			cfg.StartTick = *startTick
		case "http-addr":
			cfg.HTTPAddr = *httpAddr
			if *httpAddr == "" {
				cfg.HTTPAddr = "off"
			}
		}
	})
	return cfg, sf, nil
}

func serve(args []string, stdout, stderr io.Writer) error {
	cfg, sf, err := serveConfig(args, os.Getenv, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(sf.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// A durable server gets at least two Ps even on one CPU (a server
	// pinned with taskset): the snapshot goroutine's file writes and fsync
	// would otherwise hold the only P while in the kernel, and the event
	// loop would wait for the scheduler's monitor to hand it back, up to
	// 10 ms late. With two, the kernel time-slices the threads instead.
	if cfg.Persistence != "off" && runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	// Signals are caught from here on: one that arrives while the state is
	// being recovered, or right after the server starts, still stops it
	// gracefully.
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	// The operator listener starts before recovery: /healthz answers and
	// /readyz says 503 until the server accepts clients.
	op, err := startOperator(&cfg, log)
	if err != nil {
		return err
	}
	if op != nil {
		defer op.Close()
	}
	srv, err := server.New(cfg, log)
	if err != nil {
		return err
	}
	if op != nil {
		op.Attach(srv)
	}
	if sf.cpuProfile != "" {
		f, err := os.Create(sf.cpuProfile)
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

	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case <-srv.Done():
		return fmt.Errorf("server stopped")
	}
	// The last snapshot of a large state takes a while: a second signal
	// stops waiting for it (the log still holds everything).
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	go func() {
		select {
		case s := <-sig:
			log.Warn("second signal: exiting without waiting for the last snapshot", "signal", s.String())
			cancel()
		case <-ctx.Done():
		}
	}()
	return srv.Stop(ctx)
}

// startOperator starts the operator HTTP listener of cfg.HTTPAddr (its
// default when empty), or none for "off", and turns on the server's
// metrics with it.
func startOperator(cfg *server.Config, log *slog.Logger) (*operator.Operator, error) {
	addr := cfg.HTTPAddr
	switch addr {
	case "off":
		return nil, nil
	case "":
		addr = operator.DefaultAddr
	}
	op, err := operator.New(operator.Options{Addr: addr, Log: log})
	if err != nil {
		return nil, fmt.Errorf("http_addr: %w", err)
	}
	if err := op.Serve(); err != nil {
		return nil, fmt.Errorf("http_addr: %w", err)
	}
	cfg.Metrics = true
	return op, nil
}

// stopTimeout bounds a graceful stop: writing what is queued and the last
// snapshot (about a second per 10M timers).
const stopTimeout = 60 * time.Second
