package config

// Reading a config: decoding the YAML strictly, errors in the operator's
// terms, and relative paths resolved against the file's directory.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Load reads and validates a config file. Relative paths in it are resolved
// against the file's directory.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.resolve(filepath.Dir(path))
	return c, nil
}

// Parse decodes and validates a config.
func Parse(data []byte) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Config
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("parsing config: the file holds no settings")
		}
		return nil, fmt.Errorf("parsing config: %w", yamlError(err))
	}
	// A second document ("---") would be ignored silently, and with it
	// whatever the operator put there. Empty ones are harmless.
	for {
		var more yaml.Node
		err := dec.Decode(&more)
		if errors.Is(err, io.EOF) {
			break
		}
		empty := len(more.Content) == 0 || more.Content[0].Tag == "!!null"
		if err != nil || !empty {
			return nil, errors.New("parsing config: the file holds more than one YAML document (a \"---\" line); put everything in one")
		}
	}
	c.setDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// yamlTypeErrors match the messages in a yaml.TypeError, which name Go
// types ("field foo not found in type config.Log", "cannot unmarshal !!str
// `soon` into time.Duration").
var (
	yamlUnknownField = regexp.MustCompile(`(?s)^line (\d+): field (.*) not found in type \S+$`)
	yamlFieldTwice   = regexp.MustCompile(`(?s)^line (\d+): field (.*) already set in type \S+$`)
	yamlWrongType    = regexp.MustCompile(`(?s)^line (\d+): cannot unmarshal (.*) into (\S+)$`)
)

// yamlError rewrites a YAML decoding error in the operator's terms: what
// was expected where, without Go type names or YAML tags.
func yamlError(err error) error {
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%q is not a time in RFC 3339 form, such as 2026-01-01T00:00:00Z", pe.Value)
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
	}
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		msgs[i] = e
		if m := yamlUnknownField.FindStringSubmatch(e); m != nil {
			msgs[i] = fmt.Sprintf("line %s: unknown field %q", m[1], m[2])
		} else if m := yamlFieldTwice.FindStringSubmatch(e); m != nil {
			msgs[i] = fmt.Sprintf("line %s: field %q is set twice", m[1], m[2])
		} else if m := yamlWrongType.FindStringSubmatch(e); m != nil {
			// m[2] is a YAML tag, followed for a scalar by its value
			// (shortened) in backquotes.
			got := map[string]string{"!!seq": "a list", "!!map": "a mapping", "!!null": "an empty value"}[m[2]]
			if got == "" {
				got = fmt.Sprintf("the value tagged %q", m[2])
				if j := strings.Index(m[2], " `"); j >= 0 && strings.HasSuffix(m[2], "`") {
					got = fmt.Sprintf("%q", m[2][j+2:len(m[2])-1])
				}
			}
			msgs[i] = fmt.Sprintf("line %s: %s is not %s", m[1], got, yamlWant(m[3]))
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// yamlWant describes in words the value a Go type (as yaml.v3 names it)
// holds.
func yamlWant(goType string) string {
	switch {
	case goType == "time.Duration":
		return "a duration, such as 200ms or 1m"
	case goType == "time.Time":
		return "a time in RFC 3339 form, such as 2026-01-01T00:00:00Z"
	case goType == "bool" || goType == "*bool":
		return "true or false"
	case goType == "int":
		return "a whole number"
	case goType == "string":
		return "a single value (text)"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	default:
		return "a mapping of fields"
	}
}

// resolve makes the config's relative paths absolute, against dir (the
// config file's directory).
func (c *Config) resolve(dir string) {
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&c.Database)
	if c.Witness != nil {
		abs(&c.Witness.Key)
		for i, src := range c.Witness.LogLists {
			if !strings.Contains(src, "://") {
				abs(&c.Witness.LogLists[i])
			}
		}
	}
	c.Mirror.resolve(abs)
	for i := range c.Listen {
		abs(&c.Listen[i].TLSCert)
		abs(&c.Listen[i].TLSKey)
		if a := c.Listen[i].ACME; a != nil {
			abs(&a.CacheDir)
			abs(&a.CARoots)
		}
	}
	for i := range c.Logs {
		l := &c.Logs[i]
		abs(&l.Key)
		for i := range l.Roots.File {
			abs(&l.Roots.File[i])
		}
		for i := range l.Roots.Extra {
			abs(&l.Roots.Extra[i])
		}
		for i := range l.Roots.Reject {
			abs(&l.Roots.Reject[i].File)
		}
		abs(&l.Storage.Dir)
		abs(&l.Storage.Archive)
		if l.Storage.S3 != nil {
			abs(&l.Storage.S3.CredentialsFile)
		}
		abs(&l.Database)
	}
}
