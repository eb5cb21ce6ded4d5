package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/server"
)

// setLevel sets level to name (debug, info, warn or error; "" is info).
func setLevel(level *slog.LevelVar, name string) error {
	if name == "" {
		name = "info"
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(name)); err != nil {
		return fmt.Errorf("log level (log_level, -log-level) %q: want debug, info, warn or error", name)
	}
	level.Set(l)
	return nil
}

// newLogger returns the server's logger writing to w in format (log_format,
// -log-format: "text", the default for "", or "json") at level.
func newLogger(w io.Writer, format string, level *slog.LevelVar) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "", server.LogText:
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case server.LogJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format (log_format, -log-format) %q: want text or json", format)
}

// reloadTimeout bounds the wait for the event loop to apply a reload.
const reloadTimeout = 10 * time.Second

// reload is what SIGHUP does: it reads the configuration again (the config
// file, the environment and the command line's flags, which still beat the
// file) and applies what can change while the server runs (see
// server.Server.Reload), the log level included. Every change is logged, and
// those that need a restart as such. A config that does not load, or that
// -config-check would refuse (even in a key that needs a restart), is logged
// as an error naming the key and line, and nothing changes.
func reload(srv *server.Server, reread func() (server.Config, serveFlags, error), level *slog.LevelVar, log *slog.Logger) {
	log.Info("SIGHUP: reloading the configuration")
	cfg, sf, err := reread()
	if err == nil {
		err = cfg.Check() // all of it, as a start would: a file that could not start the server is refused
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), reloadTimeout)
		_, err = srv.Reload(ctx, cfg)
		cancel()
	}
	err = server.LocateConfigError(err, sf.configPath, sf.fromFile)
	if err != nil {
		log.Error("config reload failed: the running configuration is kept", "err", err)
		return
	}
	if err := setLevel(level, cfg.LogLevel); err != nil { // checked by Reload
		log.Error("config reload", "err", err)
	}
}

// reloading is the sd_notify state sent when a reload begins: systemd's
// Type=notify-reload wants the monotonic clock's time with it.
func reloading() string {
	if us, ok := monotonicUsec(); ok {
		return fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", us)
	}
	return "RELOADING=1"
}

// sdNotify sends state (such as "READY=1") to systemd's notification
// socket, named by $NOTIFY_SOCKET (a path, or an abstract socket starting
// with "@"), as sd_notify(3) does. Without $NOTIFY_SOCKET (not run by
// systemd with Type=notify) it does nothing and returns nil.
func sdNotify(getenv func(string) string, state string) error {
	name := getenv("NOTIFY_SOCKET")
	if name == "" {
		return nil
	}
	if !strings.HasPrefix(name, "/") && !strings.HasPrefix(name, "@") {
		return errors.New("NOTIFY_SOCKET " + name + ": want a path or an abstract socket (@name)")
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"}) // Go makes "@name" abstract
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}
