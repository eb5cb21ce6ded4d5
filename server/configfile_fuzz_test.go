package server

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadConfig feeds arbitrary bytes to the config loader as a file.
// Whatever the bytes: LoadConfig and Check do not panic; every error that
// names a line names one of the file's lines, and one that names a key
// names a key of the config; a config that loads is checked without
// touching any file but the one given. Seeds: configs/tickwheel.yaml and
// the malformed cases of TestConfigErrorsNameLineAndKey. Run it with
// go test -run '^$' -fuzz FuzzLoadConfig ./server/.
func FuzzLoadConfig(f *testing.F) {
	if b, err := os.ReadFile("../configs/tickwheel.yaml"); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"tick: 10ms\nlimits:\n  max_timers: many\n  bogus: 1\n",
		"# comment\ntimeouts:\n  idle: 1m\nsnapshot:\n  every_records: -5\n",
		"limits: {max_frame: 1k, max_data: [1, 2]}\n",
		"tick: !!binary aGVsbG8=\n",
		"a: &x [*x]\n",
		"tick: 10ms\n---\ntick: 20ms\n",
		"persistence: fsync\nfsync: sometimes\n",
		"\t- 1\n",
		"",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "c.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return // a config file is small; big inputs only slow the search
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		lines := bytes.Count(data, []byte("\n")) + 1
		cfg, err := LoadConfig(path)
		if err != nil {
			checkConfigErr(t, err, lines)
			return
		}
		// Check must not read or make files the fuzzer names.
		cfg.AdminTokenFile, cfg.ClientTokenFile = "", ""
		cfg.DataDir = filepath.Join(dir, "data")
		if cerr := cfg.Check(); cerr != nil {
			_ = cerr.Error()
			checkConfigErr(t, LocateConfigError(cerr, path, nil), lines)
		}
		if _, err := os.Stat(cfg.DataDir); err == nil {
			t.Fatalf("Check made the data directory")
		}
	})
}

// checkConfigErr checks that every ConfigError in err names a line of the
// file (lines long) when it names one, and has a key and a message.
func checkConfigErr(t *testing.T, err error, lines int) {
	t.Helper()
	msg := err.Error()
	if msg == "" {
		t.Fatalf("an error without a message")
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var ce *ConfigError
		if !errors.As(e, &ce) {
			continue
		}
		if ce.Line < 0 || ce.Line > lines {
			t.Fatalf("error %q names line %d of a file of %d lines", ce.Error(), ce.Line, lines)
		}
		if ce.Key == "" || strings.TrimSpace(ce.Msg) == "" {
			t.Fatalf("error %q lacks its key or message", ce.Error())
		}
	}
}
