package operator

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"
)

// The listener's guards, before any route: on loopback the Host header must
// name loopback (a web page whose name an attacker re-points at 127.0.0.1,
// "DNS rebinding", sends its own name); beyond loopback the bearer token is
// required, and an address that sends too many wrong ones is refused for a
// while without its token being looked at, so it cannot be guessed at speed.

// guard checks r before it is routed; it writes the refusal and reports
// false when r may not go on.
func (o *Operator) guard(w http.ResponseWriter, r *http.Request) bool {
	if !o.exposed {
		if !loopbackHost(r.Host) {
			o.rlog.Warn("operator HTTP request refused: Host is not a loopback name (DNS rebinding?)",
				"host", r.Host, "remote", r.RemoteAddr)
			http.Error(w, fmt.Sprintf("Host %q refused: this listener is on loopback and answers only requests for "+
				"127.0.0.1, ::1 or localhost", r.Host), http.StatusForbidden)
			return false
		}
		return true
	}
	if r.URL.Path == "/healthz" {
		return true
	}
	src := o.source()
	if src == nil {
		http.Error(w, "starting: the admin token is not known yet", http.StatusServiceUnavailable)
		return false
	}
	ip := remoteIP(r.RemoteAddr)
	if wait, ok := o.bad.allow(ip); !ok {
		o.badTokens.Add(1)
		o.rlog.Warn("operator HTTP request refused: too many bad bearer tokens from this address", "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", fmt.Sprint(int(wait.Seconds())+1))
		w.Header().Set("Connection", "close")
		http.Error(w, "too many requests with a bad bearer token from this address: try again later", http.StatusTooManyRequests)
		return false
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	want := src.AdminToken()
	if !ok || want == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(want)) != 1 {
		o.badTokens.Add(1)
		o.bad.fail(ip)
		o.rlog.Warn("operator HTTP request refused: missing or bad bearer token", "remote", r.RemoteAddr,
			"path", r.URL.Path, "token_given", ok)
		w.Header().Set("WWW-Authenticate", `Bearer realm="tickwheel"`)
		w.Header().Set("Connection", "close") // each guess costs a connection
		http.Error(w, "the admin token is required as a bearer token (Authorization: Bearer <token>)", http.StatusUnauthorized)
		return false
	}
	return true
}

// loopbackHost reports whether a Host header (with or without a port) names
// loopback: localhost or a loopback address. An empty one (HTTP/1.0, which no
// browser sends) passes.
func loopbackHost(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// remoteIP is the address of RemoteAddr, without its port (the zero Addr when
// it does not parse: all such requests then share one budget).
func remoteIP(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// maxTracked bounds the addresses badTokens keeps a budget for.
const maxTracked = 10_000

// badTokens is a budget of bad bearer tokens per client address: a token
// bucket of perMinute tokens, refilled at perMinute a minute; an address
// whose bucket is empty is refused until it refills. Safe from any goroutine.
type badTokens struct {
	perMinute float64
	now       func() time.Time

	mu sync.Mutex
	by map[netip.Addr]*bucket
}

// bucket is one address's budget: tokens at instant at.
type bucket struct {
	tokens float64
	at     time.Time
}

func newBadTokens(perMinute int, now func() time.Time) *badTokens {
	return &badTokens{perMinute: float64(perMinute), now: now, by: make(map[netip.Addr]*bucket)}
}

// refill brings b up to now; the caller holds mu.
func (t *badTokens) refill(b *bucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = min(t.perMinute, b.tokens+d.Minutes()*t.perMinute)
	}
	b.at = now
}

// allow reports whether ip may try a token, and else how long until it may.
func (t *badTokens) allow(ip netip.Addr) (wait time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.by[ip]
	if b == nil {
		if len(t.by) >= maxTracked && !t.prune() {
			return time.Minute, false // too many addresses failing at once: refuse the new ones
		}
		return 0, true
	}
	now := t.now()
	t.refill(b, now)
	if b.tokens >= 1 {
		return 0, true
	}
	return time.Duration((1 - b.tokens) / t.perMinute * float64(time.Minute)), false
}

// fail takes one token from ip's budget.
func (t *badTokens) fail(ip netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	b := t.by[ip]
	if b == nil {
		if len(t.by) >= maxTracked && !t.prune() {
			return
		}
		b = &bucket{tokens: t.perMinute, at: now}
		t.by[ip] = b
	}
	t.refill(b, now)
	b.tokens = max(b.tokens-1, 0)
}

// prune forgets the addresses whose budget is full again and reports
// whether any room was made; the caller holds mu.
func (t *badTokens) prune() bool {
	now := t.now()
	for ip, b := range t.by {
		if t.refill(b, now); b.tokens >= t.perMinute {
			delete(t.by, ip)
		}
	}
	return len(t.by) < maxTracked
}

// cmdline serves /debug/pprof/cmdline as net/http/pprof does (the arguments,
// NUL-separated), with the value of every token flag (-admin-token,
// -token: any flag whose name ends in "token") replaced by "REDACTED".
func cmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprint(w, strings.Join(redactArgs(os.Args), "\x00"))
}

// redactArgs returns args with the values of token flags replaced.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	for i := 1; i < len(out); i++ {
		name, val, hasVal := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		if !strings.HasPrefix(out[i], "-") || !strings.HasSuffix(strings.ToLower(name), "token") {
			continue
		}
		if hasVal {
			if val != "" {
				out[i] = out[i][:len(out[i])-len(val)] + "REDACTED"
			}
		} else if i+1 < len(out) {
			i++
			out[i] = "REDACTED"
		}
	}
	return out
}
