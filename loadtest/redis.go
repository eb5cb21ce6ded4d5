package loadtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisTarget is the standard Redis sorted-set delay queue: a timer is a
// member of one sorted set whose score is its due instant, and a poller
// pops everything due every millisecond with a Lua script.
//
//   - Time base: scores are µs on the generator's monotonic clock since an
//     epoch chosen at Open (the generator and Redis share the machine, so the
//     server's clock is never read). A timer due at d gets score ceil(d), and
//     the poller passes floor(now), so nothing can be popped before its due.
//   - Add: one ZADD per timer, pipelined (go-redis pipelines of up to 1000
//     commands per worker). The member carries everything the consumer
//     needs: "every:repeat:first:worker:receiver:tid:" + data (every and first
//     in µs), so no second structure (hash) is needed.
//   - Poller: one goroutine; every 1 ms it runs popScript, which takes the
//     members with score <= now (ZRANGEBYSCORE … LIMIT 0 Batch), removes them
//     (they are a prefix of the set: ZREMRANGEBYRANK) and re-adds a repeating
//     member at its next scheduled score (from its scheduled time, no drift)
//     unless that was its last firing — all atomically, so a cancel either
//     removes the member (it never fires again) or finds it gone (the last
//     firing was already popped). A full batch is followed at once by the next.
//   - Cancel: ZREM of the member (1 = cancelled), pipelined.
//   - Clear: DEL of the key; every Open uses a fresh key.
type RedisTarget struct {
	Addr    string
	Pid     int           // the server's pid when known, for Process
	TickDur time.Duration // converts tick-based parameters (repeat periods); default 10ms
	Batch   int           // the poller's LIMIT; default 1000
	Poll    time.Duration // the poller's period; default 1ms
	// Window is the commands per pipeline a worker sends before waiting
	// for their replies; default 1000. 1 = a caller waiting for each reply.
	Window int
	// AOF, when set ("always", "everysec" or "no"), puts the server in AOF
	// mode for the run (CONFIG SET appendonly yes, appendfsync AOF) at
	// Open, and restores both settings at Close. Turning appendonly on
	// makes Redis write its whole dataset to a new AOF in the background
	// (a fork); Open waits until that rewrite is over. Redis also rewrites
	// the AOF in the background on its own when it has doubled (and is
	// at least 64 MB: auto-aof-rewrite-percentage / -min-size).
	AOF string

	rdb     *redis.Client
	key     string
	epoch   int64 // Now() at Open: score 0
	sink    Sink
	members []map[Key]string // per worker: the member of each timer it added
	stop    chan struct{}
	done    chan struct{}
	pollErr atomic.Pointer[error]
	polls   atomic.Int64
	restore map[string]string // the settings AOF changed, to put back at Close
	// rewrites is aof_rewrites at Open (after the first rewrite), and
	// note the rewrites since, read at Clear.
	rewrites int
	note     string
}

var redisOpens atomic.Int64

// popScript pops the due members (KEYS[1], now = ARGV[1] µs, at most
// ARGV[2]) and re-adds each repeating one at its next firing; it returns the
// popped members and their scores, interleaved.
var popScript = redis.NewScript(`
local items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local n = #items / 2
if n == 0 then return items end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
for i = 1, #items, 2 do
  local m = items[i]
  local e, r, f = string.match(m, '^(%d+):(%d+):(-?%d+):')
  e = tonumber(e)
  if e > 0 then
    local s = tonumber(items[i + 1])
    local fired = math.floor((s - tonumber(f)) / e + 0.5) + 1
    if fired < tonumber(r) then
      redis.call('ZADD', KEYS[1], s + e, m)
    end
  end
end
return items
`)

// Name implements Target.
func (r *RedisTarget) Name() string {
	if r.AOF != "" {
		return "redis(aof=" + r.AOF + ")"
	}
	return "redis"
}

// Tick implements Target: the poller has no quantum to schedule on (its
// 1 ms period is part of the measured lateness); TickDur only converts
// tick-based parameters to durations.
func (r *RedisTarget) Tick() time.Duration {
	if r.TickDur == 0 {
		return 10 * time.Millisecond
	}
	return r.TickDur
}

// PID implements Process.
func (r *RedisTarget) PID() int { return r.Pid }

// Open implements Target.
func (r *RedisTarget) Open(ctx context.Context, conns int, sink Sink) error {
	if r.Batch <= 0 {
		r.Batch = 1000
	}
	if r.Poll <= 0 {
		r.Poll = time.Millisecond
	}
	r.rdb = redis.NewClient(&redis.Options{
		Addr:                     r.Addr,
		PoolSize:                 conns + 4,
		PipelinePoolSize:         conns + 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		ReadTimeout:              30 * time.Second,
		WriteTimeout:             30 * time.Second,
	})
	if err := r.rdb.Ping(ctx).Err(); err != nil {
		r.rdb.Close()
		return fmt.Errorf("redis %s: %w", r.Addr, err)
	}
	if err := popScript.Load(ctx, r.rdb).Err(); err != nil {
		r.rdb.Close()
		return fmt.Errorf("redis: script load: %w", err)
	}
	if r.AOF != "" {
		if err := r.setAOF(ctx); err != nil {
			r.rdb.Close()
			return err
		}
	}
	r.key = fmt.Sprintf("tickwheel-loadtest:%d:%d", os.Getpid(), redisOpens.Add(1))
	r.epoch = Now()
	r.sink = sink
	r.members = make([]map[Key]string, conns)
	for w := range r.members {
		r.members[w] = map[Key]string{}
	}
	r.pollErr.Store(nil)
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go r.poll()
	return nil
}

// us converts an instant on Now's clock to µs since the epoch, rounded up.
func (r *RedisTarget) us(t int64) int64 {
	d := t - r.epoch
	if d >= 0 {
		return (d + 999) / 1000
	}
	return d / 1000 // toward zero = up, for a negative value
}

func (r *RedisTarget) poll() {
	defer close(r.done)
	ctx := context.Background()
	var d Delivery
	next := Now()
	for {
		select {
		case <-r.stop:
			return
		default:
		}
		now := Now()
		res, err := popScript.EvalSha(ctx, r.rdb, []string{r.key}, (now-r.epoch)/1000, r.Batch).StringSlice()
		if err != nil && errors.Is(err, redis.Nil) {
			err = nil
		}
		r.polls.Add(1)
		if err != nil {
			select {
			case <-r.stop:
				return
			default:
			}
			r.pollErr.CompareAndSwap(nil, &err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		recv := Now()
		for i := 0; i+1 < len(res); i += 2 {
			if !r.decode(res[i], res[i+1], &d) {
				e := fmt.Errorf("redis: bad member %q", res[i])
				r.pollErr.CompareAndSwap(nil, &e)
				continue
			}
			d.Recv = recv
			r.sink(r.worker(res[i]), &d)
		}
		if len(res)/2 >= r.Batch {
			continue // full batch: more may be due
		}
		// Sleep to the next period boundary (no drift; skip missed ones).
		next += int64(r.Poll)
		if now := Now(); next <= now {
			next = now + int64(r.Poll) - (now-next)%int64(r.Poll)
		}
		select {
		case <-r.stop:
			return
		case <-time.After(time.Duration(next - Now())):
		}
	}
}

// member: "every:repeat:first:worker:receiver:tid:" + data.
func (r *RedisTarget) member(w int, tm *Timer, first int64) string {
	b := make([]byte, 0, 64+len(tm.Data))
	b = strconv.AppendInt(b, int64((tm.Every+time.Microsecond-1)/time.Microsecond), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(max(tm.Repeat, 1)), 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, first, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(w), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, tm.Receiver, 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, tm.Tid, 10)
	b = append(b, ':')
	b = append(b, tm.Data...)
	return string(b)
}

func (r *RedisTarget) worker(m string) int {
	f := strings.SplitN(m, ":", 5)
	w, _ := strconv.Atoi(f[3])
	return w
}

func (r *RedisTarget) decode(m, score string, d *Delivery) bool {
	f := strings.SplitN(m, ":", 7)
	if len(f) != 7 {
		return false
	}
	every, e1 := strconv.ParseInt(f[0], 10, 64)
	repeat, e2 := strconv.ParseUint(f[1], 10, 32)
	first, e3 := strconv.ParseInt(f[2], 10, 64)
	recv, e4 := strconv.ParseUint(f[4], 10, 64)
	tid, e5 := strconv.ParseUint(f[5], 10, 64)
	s, e6 := strconv.ParseFloat(score, 64)
	if err := errors.Join(e1, e2, e3, e4, e5, e6); err != nil {
		return false
	}
	fired := uint32(1)
	if every > 0 {
		fired = uint32((int64(s)-first+every/2)/every) + 1
	}
	*d = Delivery{Receiver: recv, Tid: tid, Fired: fired, Last: fired >= uint32(repeat), Data: []byte(f[6])}
	return true
}

// Add implements Target.
func (r *RedisTarget) Add(ctx context.Context, w int, ts []Timer) (AddResult, error) {
	res := AddResult{Errors: map[string]int{}}
	mine := r.members[w]
	batch := r.Window
	if batch <= 0 {
		batch = 1000
	}
	for lo := 0; lo < len(ts); lo += batch {
		hi := min(lo+batch, len(ts))
		pipe := r.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, 0, hi-lo)
		for i := lo; i < hi; i++ {
			tm := &ts[i]
			if tm.AtTick != 0 {
				return res, fmt.Errorf("redis: no virtual time")
			}
			k := Key{tm.Receiver, tm.Tid}
			if _, dup := mine[k]; dup {
				res.Errors["exists"]++
				continue
			}
			first := r.us(tm.Due)
			m := r.member(w, tm, first)
			mine[k] = m
			cmds = append(cmds, pipe.ZAdd(ctx, r.key, redis.Z{Score: float64(first), Member: m}))
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			for _, c := range cmds {
				if c.Err() != nil {
					res.Errors[c.Err().Error()]++
				} else {
					res.OK++
				}
			}
			return res, err
		}
		res.OK += len(cmds)
	}
	return res, r.err()
}

// Cancel implements Target.
func (r *RedisTarget) Cancel(ctx context.Context, w int, ks []Key) ([]Key, error) {
	var out []Key
	mine := r.members[w]
	for lo := 0; lo < len(ks); lo += 1000 {
		hi := min(lo+1000, len(ks))
		pipe := r.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, 0, hi-lo)
		keys := make([]Key, 0, hi-lo)
		for _, k := range ks[lo:hi] {
			m, ok := mine[k]
			if !ok {
				continue
			}
			cmds = append(cmds, pipe.ZRem(ctx, r.key, m))
			keys = append(keys, k)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return out, err
		}
		for i, c := range cmds {
			if c.Val() == 1 {
				out = append(out, keys[i])
				delete(mine, keys[i])
			}
		}
	}
	return out, r.err()
}

// Clear implements Target.
func (r *RedisTarget) Clear(ctx context.Context) error {
	if r.rdb == nil {
		return nil
	}
	if r.AOF != "" {
		r.note = fmt.Sprintf("redis AOF on (appendfsync %s), set at run time and restored after", r.AOF)
		if m, err := r.AOFStats(ctx); err == nil {
			n, _ := strconv.Atoi(m["aof_rewrites"])
			r.note += fmt.Sprintf("; background AOF rewrites during the run: %d", n-r.rewrites)
		}
	}
	return r.rdb.Del(ctx, r.key).Err()
}

// Close implements Target: stops the poller, deletes the key, closes the client.
func (r *RedisTarget) Close() error {
	if r.rdb == nil {
		return nil
	}
	close(r.stop)
	<-r.done
	_ = r.rdb.Del(context.Background(), r.key).Err()
	err := r.restoreAOF(context.Background())
	err = errors.Join(err, r.rdb.Close())
	r.rdb = nil
	return err
}

// err is the poller's first error, if any.
func (r *RedisTarget) err() error {
	if p := r.pollErr.Load(); p != nil {
		return fmt.Errorf("redis poller: %w", *p)
	}
	return nil
}

// Polls is how many times the poller ran the script since Open.
func (r *RedisTarget) Polls() int64 { return r.polls.Load() }

// setAOF turns AOF on with appendfsync r.AOF, noting the settings to
// restore, and waits for the rewrite that turning it on starts.
func (r *RedisTarget) setAOF(ctx context.Context) error {
	switch r.AOF {
	case "always", "everysec", "no":
	default:
		return fmt.Errorf("redis: aof %q: want always, everysec or no", r.AOF)
	}
	r.restore = map[string]string{}
	for _, k := range []string{"appendonly", "appendfsync"} {
		v, err := r.rdb.ConfigGet(ctx, k).Result()
		if err != nil {
			return fmt.Errorf("redis: CONFIG GET %s: %w", k, err)
		}
		r.restore[k] = v[k]
	}
	if err := r.rdb.ConfigSet(ctx, "appendfsync", r.AOF).Err(); err != nil {
		return fmt.Errorf("redis: CONFIG SET appendfsync %s: %w", r.AOF, err)
	}
	if err := r.rdb.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
		return fmt.Errorf("redis: CONFIG SET appendonly yes: %w", err)
	}
	if err := r.waitRewrite(ctx); err != nil {
		return err
	}
	if m, err := r.AOFStats(ctx); err == nil {
		r.rewrites, _ = strconv.Atoi(m["aof_rewrites"])
	}
	r.note = ""
	return nil
}

// Notes implements Noter.
func (r *RedisTarget) Notes() []string {
	if r.note == "" {
		return nil
	}
	return []string{r.note}
}

// waitRewrite waits until AOF is on and no rewrite runs or is scheduled.
func (r *RedisTarget) waitRewrite(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		info, err := r.rdb.Info(ctx, "persistence").Result()
		if err != nil {
			return fmt.Errorf("redis: INFO persistence: %w", err)
		}
		if strings.Contains(info, "aof_enabled:1") && strings.Contains(info, "aof_rewrite_in_progress:0") &&
			strings.Contains(info, "aof_rewrite_scheduled:0") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis: the AOF rewrite did not finish in 2 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// restoreAOF puts back the settings setAOF changed.
func (r *RedisTarget) restoreAOF(ctx context.Context) error {
	if r.restore == nil {
		return nil
	}
	var err error
	for _, k := range []string{"appendonly", "appendfsync"} {
		if v, ok := r.restore[k]; ok && v != "" {
			err = errors.Join(err, r.rdb.ConfigSet(ctx, k, v).Err())
		}
	}
	r.restore = nil
	return err
}

// AOFStats is Redis's INFO persistence as key: value pairs.
func (r *RedisTarget) AOFStats(ctx context.Context) (map[string]string, error) {
	info, err := r.rdb.Info(ctx, "persistence").Result()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(info, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}
