package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ConfigError is an invalid config value. Key is its path in the YAML
// file ("limits.max_frame"); File and Line, when known, where it is set
// (Line 0: the value is a default, or came from a flag or the
// environment). Every check of a config value returns one, so that
// LoadConfig and LocateConfigError can point at the line.
type ConfigError struct {
	File string
	Line int
	Key  string
	Msg  string // what is wrong, without the key
}

func (e *ConfigError) Error() string {
	switch {
	case e.File != "" && e.Line > 0:
		return fmt.Sprintf("config %s, line %d, key %s: %s", e.File, e.Line, e.Key, e.Msg)
	case e.File != "":
		return fmt.Sprintf("config %s, key %s: %s", e.File, e.Key, e.Msg)
	}
	return fmt.Sprintf("config: %s: %s", e.Key, e.Msg)
}

// keyErr returns a ConfigError for key.
func keyErr(key, format string, args ...any) error {
	return &ConfigError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// MaxConfigBytes bounds a config file's size: a real one is a few KiB.
const MaxConfigBytes = 1 << 20

// maxConfigKeys bounds the keys of one mapping in a config file (the top
// level has about 30): yaml.v3 checks a mapping's keys for duplicates in
// time quadratic in their number (40,000 keys took 7 s, up to 35 s on a busy
// machine), so a longer mapping is refused before it is decoded.
const maxConfigKeys = 256

// maxConfigErrors bounds the errors LoadConfig reports at once.
const maxConfigErrors = 20

// readConfigFile returns the content of the config file at path: it must
// be a regular file (a symbolic link to one is fine) of at most
// MaxConfigBytes. A FIFO, a device (/dev/zero) or a directory is refused
// at once, without reading: the open does not wait for a FIFO's writer.
func readConfigFile(path string) ([]byte, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("config %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if len(b) > MaxConfigBytes {
		return nil, fmt.Errorf("config %s: larger than %d bytes: not a config file?", path, MaxConfigBytes)
	}
	return b, nil
}

// checkKeyCounts returns an error naming the first mapping in src with more
// than maxConfigKeys keys; nil also when src does not parse (the decoder
// then says why).
func checkKeyCounts(path string, src []byte) error {
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil {
		return nil
	}
	var walk func(n *yaml.Node) error
	walk = func(n *yaml.Node) error {
		if n.Kind == yaml.MappingNode && len(n.Content)/2 > maxConfigKeys {
			return fmt.Errorf("config %s, line %d: a mapping of %d keys (at most %d): not a tickwheel config "+
				"(configs/tickwheel.yaml lists every key)", path, n.Line, len(n.Content)/2, maxConfigKeys)
		}
		for _, c := range n.Content {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(&doc)
}

// LoadConfig reads a YAML config file. Unknown keys are an error, so a typo
// does not silently fall back to a default; so is a value of the wrong
// type. Its errors name the file, the line and the key (the first
// maxConfigErrors of them). A file with no document (empty, or only
// comments) is the default config. It reads only a regular file of at most
// MaxConfigBytes, with at most maxConfigKeys keys in a mapping. It does not
// check the values: Check (or New) does.
func LoadConfig(path string) (Config, error) {
	var c Config
	b, err := readConfigFile(path)
	if err != nil {
		return c, err
	}
	if err := checkKeyCounts(path, b); err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) { // EOF: no document (empty, or comments only)
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return c, typeErrors(path, b, te)
		}
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// yamlLineErr is how yaml.v3 words each error of a TypeError.
var (
	yamlLineErr = regexp.MustCompile(`^line (\d+): (.*)$`)
	yamlUnknown = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	yamlType    = regexp.MustCompile("^cannot unmarshal !!\\w+ (.*) into (\\S+)$")
)

// typeWords says what a Go type wants in the words of a config file.
var typeWords = map[string]string{
	"time.Duration": "a duration such as 10s, 500ms or 2m", "int": "an integer", "int64": "an integer",
	"uint64": "a non-negative integer", "bool": "true or false", "float64": "a number", "string": "a string",
}

// typeErrors words te's errors with the file, line and key of each.
func typeErrors(path string, src []byte, te *yaml.TypeError) error {
	_, byLine := keyLines(src)
	var errs []error
	for i, e := range te.Errors {
		if i == maxConfigErrors {
			errs = append(errs, fmt.Errorf("config %s: %d more errors", path, len(te.Errors)-i))
			break
		}
		m := yamlLineErr.FindStringSubmatch(e)
		if m == nil {
			errs = append(errs, fmt.Errorf("config %s: %s", path, e))
			continue
		}
		line, _ := strconv.Atoi(m[1])
		ce := &ConfigError{File: path, Line: line, Key: byLine[line], Msg: m[2]}
		if u := yamlUnknown.FindStringSubmatch(m[2]); u != nil {
			ce.Msg = "unknown key (a typo? configs/tickwheel.yaml lists every key)"
		}
		if ty := yamlType.FindStringSubmatch(m[2]); ty != nil && typeWords[ty[2]] != "" {
			ce.Msg = fmt.Sprintf("%s: want %s", ty[1], typeWords[ty[2]])
		}
		if ce.Key == "" {
			errs = append(errs, fmt.Errorf("config %s, line %d: %s", path, line, m[2]))
			continue
		}
		errs = append(errs, ce)
	}
	return errors.Join(errs...)
}

// keyLines maps every key in a YAML document to the line it is on
// ("limits.max_frame" → 12), and each line to the key on it. A document
// that does not parse gives empty maps.
func keyLines(src []byte) (lines map[string]int, keys map[int]string) {
	lines, keys = map[string]int{}, map[int]string{}
	var doc yaml.Node
	if yaml.Unmarshal(src, &doc) != nil {
		return lines, keys
	}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				key := prefix + k.Value
				lines[key] = k.Line
				keys[k.Line] = key
				if v.Line != k.Line {
					keys[v.Line] = key
				}
				walk(v, key+".")
			}
		}
	}
	walk(&doc, "")
	return lines, keys
}

// LocateConfigError adds the file and line to a *ConfigError from Check or
// New, when its key is set in the config file at path and fromFile(key)
// says the value in force came from there (not from a flag or the
// environment). Other errors are returned as they are.
func LocateConfigError(err error, path string, fromFile func(key string) bool) error {
	var ce *ConfigError
	if path == "" || !errors.As(err, &ce) || ce.File != "" {
		return err
	}
	src, rerr := readConfigFile(path)
	if rerr != nil {
		return err
	}
	lines, _ := keyLines(src)
	out := *ce
	if line, ok := lines[ce.Key]; ok && (fromFile == nil || fromFile(ce.Key)) {
		out.File, out.Line = path, line
	}
	return &out
}

// Check validates c as New would, without making or changing any file (New
// creates <data_dir>/admin.token at first start; Check does not) and
// without opening the data directory: the values, their ranges and how
// they fit together, the token files (read), and protected mode. Errors
// about a key are *ConfigError.
func (c Config) Check() error {
	c, err := c.withDefaults()
	if err != nil {
		return err
	}
	if c.AdminToken == "" && c.AdminTokenFile == "" {
		// New would read or make <data_dir>/admin.token: a random token
		// (64 hex digits), which never equals the client token; a stand-in
		// of the same length checks the rest.
		c.AdminToken = strings.Repeat("x", 64)
	}
	if c.ClientToken == "" && c.ClientTokenFile == "" && c.ClientTokenAuto {
		c.ClientToken = strings.Repeat("y", 64) // <data_dir>/client.token, likewise
	}
	return c.secure(slog.New(slog.DiscardHandler))
}
