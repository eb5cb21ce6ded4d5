// Package operator serves tickwheel's operator HTTP listener: Prometheus
// metrics, health and readiness checks, Go's pprof profiles and a live
// status page, on a port of their own beside the game protocol's
// (cmd/tickwheel starts it on 127.0.0.1:7421 by default).
//
//	/metrics        Prometheus text format (docs/OPERATIONS.md lists every metric)
//	/healthz        200 while the process serves HTTP
//	/readyz         200 once the server accepts clients (after recovery) and its log can be written
//	                (a cluster node: once it knows a leader and has applied what it knows committed), else 503
//	/debug/pprof/   net/http/pprof
//	/               the status page; /status.json feeds it
//
// An Operator can start before the server exists (New, Serve): /healthz
// answers at once, /readyz says 503 until Attach gives it a server that
// is ready, and /metrics holds the Go runtime and process metrics only.
//
// On an address that is not loopback every path but /healthz requires the
// admin token as a bearer token (Authorization: Bearer <token>); until a
// server is attached (and so the token is known) those paths answer 503.
// An address that sends too many bad tokens is answered 429 for a while. On
// loopback the Host header must name loopback (guard.go). The listener
// holds at most Limits.MaxConnections connections, with read, write and
// idle timeouts (limit.go).
package operator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tickwheel/tickwheel/server"
	"github.com/tickwheel/tickwheel/server/tlsconf"
)

// DefaultAddr is the operator listener's default address.
const DefaultAddr = "127.0.0.1:7421"

// Source is what the operator reads: a *server.Server.
type Source interface {
	// ReadMetrics copies the server's counters (see server.Server.ReadMetrics).
	ReadMetrics(ctx context.Context, top int) (server.Metrics, error)
	// Ready reports whether the server accepts clients.
	Ready() bool
	// ReadOnly says why the server refuses changes (its log cannot be
	// written or fsynced), or "".
	ReadOnly() string
	// AdminToken is the bearer token a non-loopback listener requires.
	AdminToken() string
}

// Options configure an Operator. The zero value serves on DefaultAddr.
type Options struct {
	// Addr is the listen address (Serve). Default DefaultAddr; port 0
	// picks a free port (Addr reports it).
	Addr string
	// Log takes the listener's own lines. Default: discarded.
	Log *slog.Logger
	// History is how long the status page's plots reach back, one sample
	// a second while the server is busy (one every 10 s while it is idle:
	// no request, firing or connection since the last). Default 10
	// minutes.
	History time.Duration
	// Top is how many receivers the status page lists by live timers and
	// by queued events. Default 10.
	Top int
	// Limits bound the listener's connections: how many may be open at
	// once and the read, write and idle timeouts (see server.HTTPLimits,
	// whose defaults apply to zero fields). cmd/tickwheel passes the
	// config's http section, which the server takes out of its fd budget.
	Limits server.HTTPLimits
}

// Operator is the operator HTTP listener. Safe from any goroutine.
type Operator struct {
	opts    Options
	log     *slog.Logger
	rlog    *server.RateLog // lines a client can cause at will
	bad     *badTokens      // bad bearer tokens per client address (guard.go)
	src     atomic.Pointer[Source]
	reg     *prometheus.Registry
	mux     *http.ServeMux
	hist    *history
	exposed bool // the address is not loopback: bearer token required
	// scrapeErrors counts scrapes whose ReadMetrics failed.
	scrapeErrors atomic.Uint64
	// badTokens counts requests refused for their bearer token (guard.go).
	badTokens atomic.Uint64
	// looks counts the sampler's wake-ups (for the tests).
	looks atomic.Int64

	// tls serves the certificate when Limits.TLS is set (HTTPS); nil
	// otherwise. Set by Serve.
	tls atomic.Pointer[tlsconf.Reloader]

	mu     sync.Mutex
	ln     *capListener
	srv    *http.Server
	stop   chan struct{}
	done   chan struct{} // the sampler has stopped
	closed bool
}

// New builds an Operator for opts; Serve starts it. It fails on an
// address that cannot be parsed.
func New(opts Options) (*Operator, error) {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.History <= 0 {
		opts.History = 10 * time.Minute
	}
	if opts.Top <= 0 {
		opts.Top = 10
	}
	if opts.Limits.MaxConnections < 0 || opts.Limits.MaxBadTokens < 0 {
		return nil, fmt.Errorf("operator: limits must not be negative: %+v", opts.Limits)
	}
	opts.Limits = opts.Limits.WithDefaults()
	exposed, err := Exposed(opts.Addr)
	if err != nil {
		return nil, err
	}
	o := &Operator{opts: opts, log: opts.Log, rlog: server.NewRateLog(opts.Log, 10),
		bad: newBadTokens(opts.Limits.MaxBadTokens, time.Now), reg: prometheus.NewRegistry(), mux: http.NewServeMux(),
		exposed: exposed, stop: make(chan struct{}), done: make(chan struct{})}
	o.hist = newHistory(int(opts.History / time.Second))
	o.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{o: o})
	o.routes()
	return o, nil
}

// Exposed reports whether addr listens beyond loopback: an empty host,
// an unspecified address (0.0.0.0, ::), any other IP that is not
// loopback, or a host name other than localhost.
func Exposed(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("operator: address %q: %w", addr, err)
	}
	if host == "localhost" {
		return false, nil
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback(), nil
}

// Attach gives the operator the server it reports on, once New has
// returned it (recovery done); readiness then follows src.Ready. A later
// Attach replaces it (a server started again in the same process).
func (o *Operator) Attach(src Source) { o.src.Store(&src) }

// source returns the attached server, or nil.
func (o *Operator) source() Source {
	if p := o.src.Load(); p != nil {
		return *p
	}
	return nil
}

// Handler returns the operator's HTTP handler (the token check included).
func (o *Operator) Handler() http.Handler { return http.HandlerFunc(o.serveHTTP) }

func (o *Operator) routes() {
	o.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	o.mux.HandleFunc("GET /readyz", o.readyz)
	o.mux.Handle("GET /metrics", promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{ErrorLog: slogErrorLog{o.log}}))
	o.mux.HandleFunc("/debug/pprof/", pprof.Index)
	o.mux.HandleFunc("/debug/pprof/cmdline", cmdline) // token flags redacted
	o.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	o.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	o.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	o.mux.HandleFunc("GET /status.json", o.statusJSON)
	o.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assetsFS)))
	o.mux.HandleFunc("GET /{$}", o.statusPage)
}

// poker is a Source to be told of a request served, which allocates
// without being the server's activity (server.Server.Poke).
type poker interface{ Poke() }

// serveHTTP checks the request (guard.go), then routes it; then it pokes
// the server, whose memory returner may sleep through its idleness while
// its collector rests (the request's garbage counts against the rest).
func (o *Operator) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if p, ok := o.source().(poker); ok {
		defer p.Poke()
	}
	if o.guard(w, r) {
		o.mux.ServeHTTP(w, r)
	}
}

// readyz answers 200 once the attached server accepts clients.
func (o *Operator) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	src := o.source()
	switch {
	case src == nil:
		http.Error(w, "not ready: starting (recovering the state)", http.StatusServiceUnavailable)
	case !src.Ready():
		http.Error(w, "not ready: the server is not accepting clients", http.StatusServiceUnavailable)
	case src.ReadOnly() != "":
		// Hellos, binds, reads and firings go on; changes get unavailable.
		http.Error(w, "not ready: read-only: "+src.ReadOnly(), http.StatusServiceUnavailable)
	default:
		fmt.Fprintln(w, "ready")
	}
}

// Serve listens on Options.Addr and serves in the background, with the
// status page's sampler; Close stops both. It may be called once.
func (o *Operator) Serve() error {
	ln, err := net.Listen("tcp", o.opts.Addr)
	if err != nil {
		return fmt.Errorf("operator: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.ln != nil {
		ln.Close()
		return errors.New("operator: closed, or serving already")
	}
	lim := o.opts.Limits
	var reloader *tlsconf.Reloader
	if lim.TLS.Enabled() {
		if reloader, err = tlsconf.New(lim.TLS); err != nil {
			ln.Close()
			return fmt.Errorf("operator: http.tls.%w", err)
		}
		o.tls.Store(reloader)
	}
	o.ln = &capListener{Listener: ln, max: int64(lim.MaxConnections), onRefuse: func() {
		o.rlog.Warn("operator HTTP connection refused: limit http.max_connections reached", "max_connections", lim.MaxConnections)
	}, silent: reloader != nil}
	var serving net.Listener = o.ln
	if reloader != nil {
		// net/http runs each connection's handshake within the smallest
		// of its timeouts (http.read_timeout by default).
		serving = tls.NewListener(o.ln, reloader.Config("http/1.1"))
	}
	o.srv = &http.Server{Handler: o.Handler(), ErrorLog: slogErrorLog{o.log}.logger(),
		ReadHeaderTimeout: lim.ReadTimeout, ReadTimeout: lim.ReadTimeout, WriteTimeout: lim.WriteTimeout,
		IdleTimeout: lim.IdleTimeout}
	if lim.IdleTimeout == 0 { // off (net/http would fall back on ReadTimeout for 0)
		o.srv.IdleTimeout = -1
	}
	go func() {
		if err := o.srv.Serve(serving); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.log.Error("operator HTTP listener stopped", "err", err)
		}
	}()
	go o.sample()
	o.log.Info("operator HTTP listening", "addr", ln.Addr().String(), "token_required", o.exposed, "tls", reloader != nil,
		"mtls", reloader != nil && reloader.MutualTLS(),
		"max_connections", lim.MaxConnections, "read_timeout", lim.ReadTimeout, "write_timeout", lim.WriteTimeout,
		"idle_timeout", lim.IdleTimeout)
	return nil
}

// ReloadTLS rereads the listener's certificate files (http.tls; on
// SIGHUP): new connections get the new certificate. On an error the old
// one stays. A no-op without TLS.
func (o *Operator) ReloadTLS() error {
	r := o.tls.Load()
	if r == nil {
		return nil
	}
	if err := r.Reload(); err != nil {
		return fmt.Errorf("operator: http.tls.%w", err)
	}
	o.log.Info("operator HTTP: TLS certificate reloaded", "subject", r.Leaf().Subject.String(),
		"not_after", r.Leaf().NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// Addr returns the address Serve listens on, with the real port; "" before
// Serve.
func (o *Operator) Addr() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ln == nil {
		return ""
	}
	return o.ln.Addr().String()
}

// Close stops the listener and the sampler. Idempotent.
func (o *Operator) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	srv := o.srv
	o.mu.Unlock()
	close(o.stop)
	if srv == nil {
		return nil
	}
	<-o.done
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}
