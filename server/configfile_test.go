package server

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// LoadConfig's errors name the file, line and key of each bad value; Check
// errors are located in the file by LocateConfigError, unless the value in
// force came from elsewhere.
func TestConfigErrorsNameLineAndKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	write := func(s string) { require.NoError(t, os.WriteFile(path, []byte(s), 0o600)) }

	write("tick: 10ms\nlimits:\n  max_timers: many\n  bogus: 1\n")
	_, err := LoadConfig(path)
	var ce *ConfigError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, ConfigError{File: path, Line: 3, Key: "limits.max_timers", Msg: "`many`: want an integer"}, *ce)
	require.Contains(t, err.Error(), path+", line 4, key limits.bogus: unknown key")

	write("# comment\ntimeouts:\n  idle: 1m\nsnapshot:\n  every_records: -5\n")
	cfg, err := LoadConfig(path)
	require.NoError(t, err)
	err = cfg.Check()
	require.EqualError(t, err, "config: snapshot.every_records: -5: must be positive")
	require.EqualError(t, LocateConfigError(err, path, nil),
		"config "+path+", line 5, key snapshot.every_records: -5: must be positive")
	require.EqualError(t, LocateConfigError(err, path, func(string) bool { return false }),
		"config: snapshot.every_records: -5: must be positive", "a flag's value is not the file's")
	other := errors.New("not a config error")
	require.Equal(t, other, LocateConfigError(other, path, nil))
}

// Check makes no file: New would make <data_dir>/admin.token.
func TestCheckMakesNoFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, Config{DataDir: dir}.Check())
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err))
	require.ErrorContains(t, Config{DataDir: dir, ClientTokenFile: filepath.Join(dir, "none")}.Check(), "client_token_file")
}
