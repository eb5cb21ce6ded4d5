// Command tickwheel runs the tickwheel timer server, and pokes a running one.
//
//	tickwheel [serve] [-config FILE] [-addr HOST:PORT] [-tick DURATION] [-frozen] [-start-tick N]
//	          [-data-dir DIR] [-fsync always|everysec|no] [-downtime catch-up|pause] [-repair]
//	          [-admin-token-file FILE] [-client-token-file FILE] [-client-token-auto] [-insecure]
//	          [-http-addr HOST:PORT] [-log-level LEVEL] [-log-format text|json]
//	tickwheel COMMAND [-addr HOST:PORT[,HOST:PORT...]] [-token T | -token-file FILE] [-data-dir DIR] [-zone ZONE] [-json] ARGS...
//	tickwheel -config-check [-config FILE] [server flags]
//	tickwheel health [-http-addr HOST:PORT]
//
// With no command it serves on 127.0.0.1:7420 with embedded defaults,
// keeping its state in ./tickwheel-data (-data-dir "" keeps it in memory
// only); flags override the config file, SIGINT or SIGTERM shut it down
// gracefully, with a last snapshot, and SIGHUP reloads the config file (the
// settings that can change while it runs: docs/OPERATIONS.md). Run by
// systemd with Type=notify, it reports READY=1 once it listens (after
// recovery). -config-check validates the configuration and exits; health
// asks the operator HTTP listener's /healthz (the container's HEALTHCHECK).
// Beside the server, the operator HTTP listener (metrics, /healthz,
// /readyz, pprof, a status page: docs/OPERATIONS.md) serves on
// 127.0.0.1:7421; -http-addr "" turns it off.
// The admin token comes from -admin-token-file, else $TICKWHEEL_ADMIN_TOKEN,
// else the config file, else <data dir>/admin.token, made at first start.
// The commands (add, cancel, get, list, watch, ff, freeze, resume, speed,
// stats, ping) talk to a running server ($TICKWHEEL_ADDR, or -addr):
// `tickwheel help` lists them. On the server's machine they find its admin
// token by themselves. They print ticks as times in the local zone (-zone)
// and tick counts as durations; -json keeps ticks.
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
	"runtime/pprof"
	"slices"
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
	serveCmd := len(args) > 0 && args[0] == "serve"
	if serveCmd {
		args = args[1:]
	}
	if !serveCmd && isVersion(args) {
		return versionCmd(args, stdout)
	}
	if !serveCmd && len(args) > 1 && args[0] == "help" {
		if _, ok := commands[args[1]]; ok || args[1] == "health" || args[1] == "certs" {
			return run([]string{args[1], "-h"}, stdout, stderr) // help add: add -h
		}
	}
	if len(args) > 0 && isHelp(args[0]) || (len(args) > 0 && strings.HasPrefix(args[0], "-") && slices.ContainsFunc(args, isHelp)) {
		// The usage, then the server's flags (serveConfig's -h), on
		// stdout: asked for, not an error.
		serveConfig([]string{"-h"}, os.Getenv, stdout)
		return 0
	}
	if !serveCmd && len(args) > 0 && args[0] == "health" {
		return healthCmd(args[1:], stdout, stderr)
	}
	if !serveCmd && len(args) > 0 && args[0] == "certs" {
		return certsCmd(args[1:], stdout, stderr)
	}
	if !serveCmd && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return runCommand(args[0], args[1:], stdout, stderr)
	}
	if err := serve(args, stdout, stderr); errors.Is(err, flag.ErrHelp) {
		return 0 // -h among the server's flags
	} else if err != nil {
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

// tlsFlagKeys are the config keys of the server's TLS flags.
var tlsFlagKeys = map[string]string{
	"tls-cert": "tls.cert_file", "tls-key": "tls.key_file", "tls-client-ca": "tls.client_ca_file",
	"tls-min-version": "tls.min_version", "http-tls-cert": "http.tls.cert_file", "http-tls-key": "http.tls.key_file",
	"http-tls-client-ca": "http.tls.client_ca_file", "cluster-tls": "cluster.tls",
}

// serveFlags are the serve flags that are not server settings, and where
// the settings came from.
type serveFlags struct {
	logLevel    string
	cpuProfile  string
	configCheck bool
	configPath  string
	// overridden are the config keys whose value came from a flag or the
	// environment, not from the config file.
	overridden map[string]bool
}

// fromFile reports whether the value of config key is the config file's.
func (sf *serveFlags) fromFile(key string) bool { return !sf.overridden[key] }

// serveConfig builds the server config from the config file, the token
// environment variables and the flags, in increasing precedence: a flag
// beats the environment, which beats the config file. Each token is taken
// from one source as a whole: -admin-token or -admin-token-file, else
// $TICKWHEEL_ADMIN_TOKEN, else admin_token or admin_token_file (else the
// server uses <data_dir>/admin.token); -admin-token is refused (it would
// show in ps); likewise -client-token-file, else
// $TICKWHEEL_CLIENT_TOKEN, else client_token or client_token_file.
func serveConfig(args []string, getenv func(string) string, stderr io.Writer) (server.Config, serveFlags, error) {
	sf := serveFlags{overridden: map[string]bool{}}
	fs := flag.NewFlagSet("tickwheel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		printUsage(fs.Output())
		fmt.Fprintln(fs.Output(), "\nserver flags:")
		fs.PrintDefaults()
	}
	configPath := fs.String("config", "", "YAML config file (see configs/tickwheel.yaml)")
	addr := fs.String("addr", "", "listen address (default 127.0.0.1:7420)")
	tick := fs.Duration("tick", 0, "tw-time tick duration (default 10ms)")
	fs.String("admin-token", "", "refused: a token on the command line shows in ps and in pprof's cmdline; use -admin-token-file or $"+envAdminToken)
	adminTokenFile := fs.String("admin-token-file", "", "file holding the admin token (default: <data dir>/admin.token, made at first start)")
	clientTokenFile := fs.String("client-token-file", "", "file holding the token every client must give (or $"+envClientToken+")")
	dataDir := fs.String("data-dir", "", "directory for the log, snapshots and admin.token (default ./"+server.DefaultDataDir+`; "" keeps timers in memory only, and admin.token still in the default)`)
	fsync := fs.String("fsync", "", "when the log reaches the disk: always, everysec (default) or no")
	downtime := fs.String("downtime", "", "tw-time while the server was down: catch-up (default) or pause")
	repair := fs.Bool("repair", false, "start on a damaged log: cut it at a bad record the snapshot does not cover, or accept its missing end; what is cut is moved into <data dir>/log/repaired-<time>/, and the records and timers lost are logged")
	clientTokenAuto := fs.Bool("client-token-auto", false, "with no client token configured, use <data dir>/"+server.ClientTokenFileName+", made at first start, and log its path (the container's default)")
	insecure := fs.Bool("insecure", false, "allow listening beyond loopback with no client token")
	maxRequestIDs := fs.Int("max-request-ids", 0, "changes whose request ids the server remembers, so that a client's retry after a lost connection or a failover applies once (limits.max_request_ids; default: -1, none, on a single server, 100000 in a cluster)")
	frozen := fs.Bool("frozen", false, "start with tw-time frozen (moved only by admin fast-forward)")
	startTick := fs.Uint64("start-tick", 0, "tw-time at start (default: the current Unix time in ticks)")
	clusterID := fs.String("cluster-id", "", "cluster mode: the cluster's name, the same on every node (off by default; see README, Running three nodes)")
	nodeID := fs.String("node-id", "", "cluster mode: this node's id, one of -peers' (a node that joins is in none)")
	raftAddr := fs.String("raft-addr", "", "cluster mode: the raft listen address host:port (default: this node's in -peers)")
	peers := fs.String("peers", "", "cluster mode: the members, id=raftaddr=clientaddr,... (the same list on every node)")
	join := fs.String("join", "", "cluster mode: start without -peers and ask the running cluster, at these client addresses (host:port,...), to add this node (with the admin token): a non-voter until it has caught up, then a voter")
	joinNonvoter := fs.Bool("join-nonvoter", false, "cluster mode, with -join: ask to stay a non-voter (a read replica; cluster.join_nonvoter)")
	clusterTLS := fs.Bool("cluster-tls", false, "cluster mode: raft traffic between nodes over TLS, with -tls-cert/-tls-key, peers verified against -tls-client-ca (cluster.tls)")
	clusterTokenFile := fs.String("cluster-token-file", "", "cluster mode: file holding the cluster token (16+ bytes; required when -raft-addr is not loopback)")
	tlsCert := fs.String("tls-cert", "", "TLS on the client port: PEM certificate chain (tls.cert_file; with -tls-key every client connection is TLS)")
	tlsKey := fs.String("tls-key", "", "TLS on the client port: PEM key of -tls-cert (tls.key_file)")
	tlsClientCA := fs.String("tls-client-ca", "", "mTLS: PEM CA certificate(s) a client's certificate must be signed by (tls.client_ca_file)")
	tlsMin := fs.String("tls-min-version", "", "lowest TLS version accepted: 1.3 (default) or 1.2 (tls.min_version)")
	httpTLSCert := fs.String("http-tls-cert", "", "HTTPS on the operator listener: PEM certificate chain (http.tls.cert_file)")
	httpTLSKey := fs.String("http-tls-key", "", "HTTPS on the operator listener: PEM key (http.tls.key_file)")
	httpTLSClientCA := fs.String("http-tls-client-ca", "", "mTLS on the operator listener: PEM CA certificate(s) (http.tls.client_ca_file)")
	httpAddr := fs.String("http-addr", "", `operator HTTP listener: metrics, health, pprof, status page (default `+operator.DefaultAddr+`; "" or "off" turns it off)`)
	fs.StringVar(&sf.logLevel, "log-level", "", "debug, info, warn or error (default: log_level in the config, else info)")
	logFormat := fs.String("log-format", "", "text (key=value lines, the default) or json (a JSON object a line); log_format in the config")
	fs.StringVar(&sf.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) to this file until shutdown")
	fs.BoolVar(&sf.configCheck, "config-check", false, "check the configuration (the config file, flags and environment), print the result and exit: 0 if valid")
	if err := fs.Parse(args); err != nil {
		return server.Config{}, sf, err
	}
	var cfg server.Config
	sf.configPath = *configPath
	if *configPath != "" {
		var err error
		if cfg, err = server.LoadConfig(*configPath); err != nil {
			return cfg, sf, err
		}
	}
	if v := getenv(envAdminToken); v != "" {
		cfg.AdminToken, cfg.AdminTokenFile = v, ""
		sf.overridden["admin_token"], sf.overridden["admin_token_file"] = true, true
	}
	if v := getenv(envClientToken); v != "" {
		cfg.ClientToken, cfg.ClientTokenFile = v, ""
		sf.overridden["client_token"], sf.overridden["client_token_file"] = true, true
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if key, ok := tlsFlagKeys[f.Name]; ok {
			sf.overridden[key] = true
			return
		}
		key := strings.ReplaceAll(f.Name, "-", "_") // -data-dir sets data_dir
		sf.overridden[key] = true
		if k, ok := strings.CutSuffix(key, "_file"); ok {
			sf.overridden[k] = true // -admin-token-file replaces admin_token too
		} else if strings.HasSuffix(key, "_token") {
			sf.overridden[key+"_file"] = true
		}
	})
	if set["admin-token"] {
		// Whoever can list processes (ps, /proc/PID/cmdline, the operator
		// listener's /debug/pprof/cmdline) would read it and be admin.
		return cfg, sf, errors.New("-admin-token: a token on the command line is visible to every user of the machine " +
			"(ps, /proc/PID/cmdline) and in pprof's cmdline: give -admin-token-file FILE or $" + envAdminToken + " instead")
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "addr":
			cfg.Addr = *addr
		case "tick":
			cfg.Tick = *tick
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
		case "client-token-auto":
			cfg.ClientTokenAuto = *clientTokenAuto
		case "insecure":
			cfg.Insecure = *insecure
		case "frozen":
			cfg.Frozen = *frozen
		case "max-request-ids":
			cfg.Limits.MaxRequestIDs = *maxRequestIDs
		case "start-tick":
			cfg.StartTick = *startTick
		case "log-level":
			cfg.LogLevel = sf.logLevel
		case "log-format":
			cfg.LogFormat = *logFormat
		case "cluster-id":
			cfg.Cluster.ID = *clusterID
		case "node-id":
			cfg.Cluster.NodeID = *nodeID
		case "raft-addr":
			cfg.Cluster.RaftAddr = *raftAddr
		case "peers":
			cfg.Cluster.Peers = *peers
		case "join":
			cfg.Cluster.Join = *join
		case "join-nonvoter":
			cfg.Cluster.JoinNonvoter = *joinNonvoter
		case "cluster-token-file":
			cfg.Cluster.TokenFile = *clusterTokenFile
		case "cluster-tls":
			cfg.Cluster.TLS = *clusterTLS
		case "tls-cert":
			cfg.TLS.CertFile = *tlsCert
		case "tls-key":
			cfg.TLS.KeyFile = *tlsKey
		case "tls-client-ca":
			cfg.TLS.ClientCAFile = *tlsClientCA
		case "tls-min-version":
			cfg.TLS.MinVersion = *tlsMin
		case "http-tls-cert":
			cfg.HTTP.TLS.CertFile = *httpTLSCert
		case "http-tls-key":
			cfg.HTTP.TLS.KeyFile = *httpTLSKey
		case "http-tls-client-ca":
			cfg.HTTP.TLS.ClientCAFile = *httpTLSClientCA
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
	if sf.configCheck {
		return configCheck(cfg, &sf, stdout)
	}
	reread := func() (server.Config, serveFlags, error) { return serveConfig(args, os.Getenv, stderr) }
	err = serveWith(cfg, &sf, reread, stdout, stderr)
	return server.LocateConfigError(err, sf.configPath, sf.fromFile)
}

// configCheck validates cfg (see server.Config.Check) and says so on
// stdout, or returns the first error, with the config file's line when the
// key is set there.
func configCheck(cfg server.Config, sf *serveFlags, stdout io.Writer) error {
	if err := cfg.Check(); err != nil {
		return server.LocateConfigError(err, sf.configPath, sf.fromFile)
	}
	what := "the configuration (flags and defaults)"
	if sf.configPath != "" {
		what = sf.configPath
	}
	fmt.Fprintf(stdout, "%s: OK\n", what)
	return nil
}

// serveWith runs the server with cfg until SIGINT or SIGTERM stops it;
// SIGHUP reloads the config that reread returns (see reload). It tells
// systemd (sdNotify) when it is ready, reloading and stopping.
func serveWith(cfg server.Config, sf *serveFlags, reread func() (server.Config, serveFlags, error), stdout, stderr io.Writer) error {
	level := new(slog.LevelVar)
	if err := setLevel(level, cfg.LogLevel); err != nil {
		return err
	}
	log, err := newLogger(stderr, cfg.LogFormat, level)
	if err != nil {
		return err
	}

	adapt := procsPolicy(cfg.Persistence != "off")
	cfg.RestGnetPool = true // this process is the server's alone (server/gnetpool.go)
	// Signals are caught from here on: one that arrives while the state is
	// being recovered, or right after the server starts, still stops it
	// gracefully (a SIGHUP then reloads once it runs).
	sig := make(chan os.Signal, 2)
	hup := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(sig)
	defer signal.Stop(hup)
	// A bad config is reported as such before anything listens (a busy
	// operator port would otherwise hide it).
	if err := cfg.Check(); err != nil {
		return err
	}
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
	if adapt != nil {
		go adapt(srv.Turns, srv.Done())
	}
	fmt.Fprintf(stdout, "tickwheel listening on %s\n", srv.Addr())
	notify := func(state string) {
		if err := sdNotify(os.Getenv, state); err != nil {
			log.Warn("sd_notify", "state", state, "err", err)
		}
	}
	notify("READY=1\nSTATUS=listening on " + srv.Addr())

wait:
	for {
		select {
		case s := <-sig:
			log.Info("shutting down", "signal", s.String())
			break wait
		case <-hup:
			notify(reloading())
			reload(srv, reread, level, log)
			if op != nil {
				if err := op.ReloadTLS(); err != nil {
					log.Error("config reload: the operator listener keeps its old certificate", "err", err)
				}
			}
			notify("READY=1")
		case <-srv.Done():
			return fmt.Errorf("server stopped")
		}
	}
	notify("STOPPING=1")
	return stopServer(srv, sig, log)
}

// stopServer stops srv gracefully, within stopTimeout. The last snapshot
// of a large state takes a while: a second signal on sig stops waiting for
// it (the log still holds everything).
func stopServer(srv *server.Server, sig <-chan os.Signal, log *slog.Logger) error {
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
	op, err := operator.New(operator.Options{Addr: addr, Log: log, Limits: cfg.HTTP})
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
