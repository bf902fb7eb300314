package witnessd

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseLogList(t *testing.T) {
	a := newTestLog(t, "example.com/a")
	b := newTestLog(t, "example.com/b")
	other := newTestLog(t, "example.com/other")
	list := fmt.Sprintf(`# a witness network's list
logs/v0

vkey %s
origin example.com/a
qpd 1440
contact ops@example.com

vkey %s
# no origin: the key's name
vkey not-a-vkey
vkey %s
origin example.com/not-the-key-name
vkey %s
origin example.com/a
`, a.vkey, b.vkey, other.vkey, a.vkey)
	logs, skipped, err := ParseLogList([]byte(list))
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 2 || logs[0].Origin != "example.com/a" || logs[0].Keys[0] != a.vkey || logs[1].Origin != "example.com/b" || logs[1].Keys[0] != b.vkey {
		t.Fatalf("logs = %+v, want example.com/a and example.com/b with their keys", logs)
	}
	if len(skipped) != 3 {
		t.Fatalf("skipped %d entries (%v), want 3: a bad vkey, a key named otherwise, an origin listed twice", len(skipped), skipped)
	}
	for i, want := range []string{`"not-a-vkey"`, `"example.com/not-the-key-name"`, "listed twice"} {
		if !strings.Contains(skipped[i].Error(), want) {
			t.Errorf("skipped[%d] = %q, want it to name %s", i, skipped[i], want)
		}
	}

	for _, bad := range []string{
		"",
		"# only comments\n",
		"logs/v1\nvkey " + a.vkey + "\n",
		"logs/v0\norigin example.com/a\n",
		"logs/v0\nvkey\n",
		"logs/v0\n" + strings.Repeat("#", MaxLogListBytes) + "\n",
	} {
		if _, _, err := ParseLogList([]byte(bad)); err == nil {
			t.Errorf("ParseLogList(%.40q) accepted a malformed list", bad)
		}
	}
	if logs, _, err := ParseLogList([]byte("logs/v0\n")); err != nil || len(logs) != 0 {
		t.Errorf("an empty list: %v, %v; want no logs and no error", logs, err)
	}
}

// TestLogListsOnlyAdd tries to use a log list to change what the witness
// trusts: a list naming a configured log with another key is refused for
// that log (a checkpoint signed by the list's key stays 403), while a new
// log it names is witnessed; lists read from a file and over HTTPS.
func TestLogListsOnlyAdd(t *testing.T) {
	configured := newTestLog(t, testOrigin)
	impostor := newTestLog(t, testOrigin) // same origin, another key
	added := newTestLog(t, "example.com/added")
	fromHTTPS := newTestLog(t, "example.com/https")

	file := filepath.Join(t.TempDir(), "list.txt")
	if err := os.WriteFile(file, fmt.Appendf(nil, "logs/v0\nvkey %s\nvkey %s\n", impostor.vkey, added.vkey), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "logs/v0\nvkey %s\n", fromHTTPS.vkey)
	}))
	defer srv.Close()
	down := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer down.Close()

	w, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t), Store: boltStore(t),
		Logs:       []Log{{Origin: configured.origin, Keys: []string{configured.vkey}}},
		LogLists:   []string{file, srv.URL + "/list", down.URL + "/list"},
		HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	failed := w.LoadLogLists(context.Background())
	if len(failed) != 1 || failed[0].Index != 2 {
		t.Fatalf("failed lists: %+v; want the one whose server answers 500", failed)
	}
	if msg := failed[0].Err.Error(); !strings.Contains(msg, down.URL) || !strings.Contains(msg, "500") {
		t.Errorf("the failed list's error %q names neither the list nor the answer", msg)
	}
	if w.Logs() != 3 {
		t.Fatalf("the witness has %d logs, want 3 (configured, added by the file, added over HTTPS)", w.Logs())
	}
	h := w.Handler(prefix)
	tr := newTree(t, 4, -1)
	if r := post(h, body(0, nil, impostor.sign(t, 4, tr.root(t, 4)))); r.code != http.StatusForbidden {
		t.Errorf("a checkpoint signed by the key a list gave for a configured log: %d %q, want 403", r.code, r.body)
	}
	for _, l := range []*testLog{configured, added, fromHTTPS} {
		if r := post(h, body(0, nil, l.sign(t, 4, tr.root(t, 4)))); r.code != http.StatusOK {
			t.Errorf("%s: %d %q, want 200", l.origin, r.code, r.body)
		}
	}
	// Read again: nothing changes, and nothing is added twice.
	w.LoadLogLists(context.Background())
	if w.Logs() != 3 {
		t.Errorf("after a second read the witness has %d logs, want 3", w.Logs())
	}
}

// TestLogListRedirectToHTTP (issue 33 §4): a list server that redirects to
// plain http (where anyone on the path could add logs) is not followed:
// the read fails, naming the refusal, and no log is added. Before, the
// client followed it.
func TestLogListRedirectToHTTP(t *testing.T) {
	sneaked := newTestLog(t, "example.com/sneaked")
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "logs/v0\nvkey %s\n", sneaked.vkey)
	}))
	defer plain.Close()
	// The plain server's address, as a non-loopback host would be: a
	// name that resolves to it only through the test's dialer.
	target := "http://plain.example:" + strings.TrimPrefix(plain.URL, "http://127.0.0.1:") + "/list"
	srv := httptest.NewTLSServer(http.RedirectHandler(target, http.StatusFound))
	defer srv.Close()
	client := srv.Client()
	tr := client.Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasPrefix(addr, "plain.example:") {
			addr = "127.0.0.1:" + strings.TrimPrefix(addr, "plain.example:")
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	client = &http.Client{Transport: tr}
	w, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t), Store: boltStore(t),
		LogLists: []string{srv.URL + "/list"}, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	failed := w.LoadLogLists(context.Background())
	if len(failed) != 1 || !strings.Contains(failed[0].Err.Error(), "https only") {
		t.Fatalf("a list redirected to http: %+v, want its read refused", failed)
	}
	if w.Logs() != 0 {
		t.Fatalf("the witness took %d logs from a list served over http", w.Logs())
	}
}

// TestLogListCap (issue 33 §4): the lists add at most max_list_logs logs
// (each costs metric series and /health work); the entries beyond are
// left out, each logged once however often the list is read, and the
// record of what was logged holds only what the lists still say.
func TestLogListCap(t *testing.T) {
	var list strings.Builder
	list.WriteString("logs/v0\n")
	for i := range 10 {
		fmt.Fprintf(&list, "vkey %s\n", newTestLog(t, fmt.Sprintf("example.com/l%d", i)).vkey)
	}
	file := filepath.Join(t.TempDir(), "list.txt")
	if err := os.WriteFile(file, []byte(list.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	configured := newTestLog(t, testOrigin)
	w, err := New(context.Background(), Config{Name: witnessName, Keys: witnessKeys(t), Store: boltStore(t),
		Logs: []Log{{Origin: configured.origin, Keys: []string{configured.vkey}}}, LogLists: []string{file}, MaxListLogs: 4,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if failed := w.LoadLogLists(context.Background()); len(failed) != 0 {
			t.Fatal(failed[0].Err)
		}
	}
	if w.Logs() != 1+4 {
		t.Fatalf("the witness has %d logs, want 5 (1 configured, 4 from the list)", w.Logs())
	}
	if n := strings.Count(logged.String(), "max_list_logs"); n != 6 {
		t.Errorf("the 6 entries beyond the cap were logged %d times over 5 reads, want once each", n)
	}
	// The list shrinks: what it no longer says is forgotten.
	if err := os.WriteFile(file, []byte("logs/v0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.LoadLogLists(context.Background())
	if n := len(w.lists.warned[file]); n != 0 {
		t.Errorf("%d warnings remembered for entries the list no longer has", n)
	}
}
