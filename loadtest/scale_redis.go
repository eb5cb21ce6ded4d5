package loadtest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisMemory is what a sorted set of timers costs Redis: its
// used_memory (INFO memory) before and after the members were added, and
// its used_memory_rss after.
type RedisMemory struct {
	Members               int
	UsedBefore, UsedAfter int64
	RSSBefore, RSSAfter   int64
	AddsPerSec            float64
}

// BytesPerMember is used_memory's growth per member.
func (m *RedisMemory) BytesPerMember() float64 {
	return float64(m.UsedAfter-m.UsedBefore) / float64(max(m.Members, 1))
}

// RedisZSetMemory adds n timers to a fresh sorted set at addr, the way the
// redis target keeps a delay queue (ZADD key due-score member), with the
// member the timer's receiver and tid ("receiver:tid", the least a member
// must say to be cancelled and delivered), over conns connections in
// pipelines of 1000, and reports used_memory per member. The key is
// deleted after.
func RedisZSetMemory(ctx context.Context, addr string, n, receivers, conns int, logf func(string, ...any)) (*RedisMemory, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: conns + 2, DisableIdentity: true, ReadTimeout: time.Minute,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	defer rdb.Close()
	key := fmt.Sprintf("tickwheel-scale-%d", time.Now().UnixNano())
	m := &RedisMemory{Members: n}
	var err error
	if m.UsedBefore, m.RSSBefore, err = redisUsedMemory(ctx, rdb); err != nil {
		return nil, err
	}
	defer rdb.Del(context.Background(), key)
	base := Now()
	err = parallel(conns, func(w int) error {
		zs := make([]redis.Z, 0, 1000)
		for i := w; i < n; {
			zs = zs[:0]
			for ; i < n && len(zs) < cap(zs); i += conns {
				t := scaleTimer(i, n, receivers, base)
				zs = append(zs, redis.Z{Score: float64(t.Due / 1000), Member: strconv.FormatUint(t.Receiver, 10) + ":" + strconv.FormatUint(t.Tid, 10)})
			}
			if err := rdb.ZAdd(ctx, key, zs...).Err(); err != nil {
				return err
			}
		}
		return nil
	})
	el := Now() - base
	if err != nil {
		return nil, fmt.Errorf("ZADD: %w", err)
	}
	m.AddsPerSec = float64(n) / (float64(el) / 1e9)
	if card, err := rdb.ZCard(ctx, key).Result(); err != nil || card != int64(n) {
		return nil, fmt.Errorf("ZCARD %d, want %d (%v)", card, n, err)
	}
	if m.UsedAfter, m.RSSAfter, err = redisUsedMemory(ctx, rdb); err != nil {
		return nil, err
	}
	logf("scale: redis: %d members added at %.2fM/s; used_memory %.1f bytes per member", n, m.AddsPerSec/1e6, m.BytesPerMember())
	return m, nil
}

// redisUsedMemory reads used_memory and used_memory_rss from INFO memory.
func redisUsedMemory(ctx context.Context, rdb *redis.Client) (used, rss int64, err error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "used_memory":
			used, _ = strconv.ParseInt(v, 10, 64)
		case "used_memory_rss":
			rss, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if used == 0 {
		return 0, 0, fmt.Errorf("INFO memory without used_memory")
	}
	return used, rss, nil
}
