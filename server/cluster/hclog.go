package cluster

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// slogLogger is hashicorp/raft's logger (hclog.Logger) writing to the
// server's log/slog logger, so that raft's lines come out in the server's
// format with the server's level. raft's Info lines (elections, leadership,
// snapshots) stay Info; its Trace lines become Debug. Its name, if any, is
// the "component" attribute.
type slogLogger struct {
	l     *slog.Logger
	name  string
	args  []interface{}
	level hclog.Level
}

// newHclog returns an hclog.Logger writing to l at level Info and above.
func newHclog(l *slog.Logger) hclog.Logger {
	return &slogLogger{l: l, level: hclog.Info}
}

func (s *slogLogger) slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (s *slogLogger) Log(level hclog.Level, msg string, args ...interface{}) {
	if level == hclog.Off || (level != hclog.NoLevel && level < s.level) {
		return
	}
	lv := s.slogLevel(level)
	if !s.l.Enabled(context.Background(), lv) {
		return
	}
	all := make([]interface{}, 0, len(s.args)+len(args)+2)
	if s.name != "" {
		all = append(all, "component", s.name)
	}
	all = append(all, s.args...)
	all = append(all, args...)
	s.l.Log(context.Background(), lv, msg, all...)
}

func (s *slogLogger) Trace(msg string, args ...interface{}) { s.Log(hclog.Trace, msg, args...) }
func (s *slogLogger) Debug(msg string, args ...interface{}) { s.Log(hclog.Debug, msg, args...) }
func (s *slogLogger) Info(msg string, args ...interface{})  { s.Log(hclog.Info, msg, args...) }
func (s *slogLogger) Warn(msg string, args ...interface{})  { s.Log(hclog.Warn, msg, args...) }
func (s *slogLogger) Error(msg string, args ...interface{}) { s.Log(hclog.Error, msg, args...) }

func (s *slogLogger) enabled(level hclog.Level) bool {
	return level >= s.level && s.l.Enabled(context.Background(), s.slogLevel(level))
}

func (s *slogLogger) IsTrace() bool { return s.enabled(hclog.Trace) }
func (s *slogLogger) IsDebug() bool { return s.enabled(hclog.Debug) }
func (s *slogLogger) IsInfo() bool  { return s.enabled(hclog.Info) }
func (s *slogLogger) IsWarn() bool  { return s.enabled(hclog.Warn) }
func (s *slogLogger) IsError() bool { return s.enabled(hclog.Error) }

func (s *slogLogger) ImpliedArgs() []interface{} { return s.args }

func (s *slogLogger) With(args ...interface{}) hclog.Logger {
	c := *s
	c.args = append(append([]interface{}{}, s.args...), args...)
	return &c
}

func (s *slogLogger) Name() string { return s.name }

func (s *slogLogger) Named(name string) hclog.Logger {
	c := *s
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (s *slogLogger) ResetNamed(name string) hclog.Logger {
	c := *s
	c.name = name
	return &c
}

func (s *slogLogger) SetLevel(level hclog.Level) { s.level = level }
func (s *slogLogger) GetLevel() hclog.Level      { return s.level }

func (s *slogLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(s.StandardWriter(opts), "", 0)
}

func (s *slogLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return lineWriter{s}
}

// lineWriter logs each write as one Info line (raft's standard-logger
// users, e.g. a library writing "[WARN] ..." lines).
type lineWriter struct{ s *slogLogger }

func (w lineWriter) Write(p []byte) (int, error) {
	w.s.Log(hclog.Info, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
