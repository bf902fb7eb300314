package witness

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/keys"
	"github.com/mosaic-ct/mosaic/internal/witness/witnesstest"
)

// fakeWitness is an add-checkpoint server (c2sp.org/tlog-witness) whose
// cosignatures are made by sign. It is a stand-in at the witness boundary:
// no independent ML-DSA-44 witness runs in CI yet (torchwood's litewitness
// signs with Ed25519 only; Sunlight v0.9.0's witness is the interop step
// for a later session), so the ML-DSA-44 witness is built here from
// checkpoint.NewMLDSA44Signer, whose signed message TestSunlightInterop
// checks against torchwood's cosigner. It keeps the protocol's state
// honestly: 409 with its size for a wrong old size, and it checks the
// consistency proof against the tree it last cosigned.
type fakeWitness struct {
	URL    string
	verify func([]byte) (*checkpoint.Verified, error)
	sign   func(text string, c checkpoint.Checkpoint) (string, error)

	mu   sync.Mutex
	size int64
	hash tlog.Hash
}

func startFakeWitness(t *testing.T, verify func([]byte) (*checkpoint.Verified, error), sign func(string, checkpoint.Checkpoint) (string, error)) *fakeWitness {
	t.Helper()
	w := &fakeWitness{verify: verify, sign: sign}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(w.addCheckpoint), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	w.URL = "http://" + ln.Addr().String() + "/"
	return w
}

func (w *fakeWitness) addCheckpoint(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/add-checkpoint" || r.Method != http.MethodPost {
		http.NotFound(rw, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	old, proof, signed, err := parseAddCheckpoint(body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	cp, err := w.verify(signed)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusForbidden)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old != w.size {
		rw.Header().Set("Content-Type", "text/x.tlog.size")
		rw.WriteHeader(http.StatusConflict)
		fmt.Fprintf(rw, "%d\n", w.size)
		return
	}
	if cp.Size < old {
		http.Error(rw, "checkpoint is older than the witness's", http.StatusBadRequest)
		return
	}
	if old > 0 && old < cp.Size {
		if err := tlog.CheckTree(proof, cp.Size, cp.Hash, old, w.hash); err != nil {
			http.Error(rw, "consistency proof: "+err.Error(), http.StatusUnprocessableEntity)
			return
		}
	} else if old > 0 && cp.Hash != w.hash {
		http.Error(rw, "same size, another root hash", http.StatusConflict)
		return
	}
	text, _, _ := strings.Cut(string(signed), "\n\n")
	lines, err := w.sign(text+"\n", cp.Checkpoint)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	w.size, w.hash = cp.Size, cp.Hash
	io.WriteString(rw, lines)
}

// parseAddCheckpoint splits an add-checkpoint body into the old size, the
// consistency proof and the checkpoint note.
func parseAddCheckpoint(body []byte) (int64, tlog.TreeProof, []byte, error) {
	head, signed, ok := bytes.Cut(body, []byte("\n\n"))
	if !ok {
		return 0, nil, nil, errors.New("no blank line before the checkpoint")
	}
	sc := bufio.NewScanner(bytes.NewReader(head))
	sc.Scan()
	n, ok := strings.CutPrefix(sc.Text(), "old ")
	old, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil {
		return 0, nil, nil, errors.New("malformed old size line")
	}
	var proof tlog.TreeProof
	for sc.Scan() {
		b, err := base64.StdEncoding.DecodeString(sc.Text())
		if err != nil || len(b) != tlog.HashSize {
			return 0, nil, nil, errors.New("malformed proof line")
		}
		proof = append(proof, tlog.Hash(b))
	}
	return old, proof, signed, nil
}

// mldsaSign cosigns with s, timestamped now.
func mldsaSign(s *checkpoint.MLDSA44Signer) func(string, checkpoint.Checkpoint) (string, error) {
	return func(text string, c checkpoint.Checkpoint) (string, error) {
		ns, err := s.NoteSigner(c, uint64(time.Now().UnixMilli()))
		if err != nil {
			return "", err
		}
		out, err := note.Sign(&note.Note{Text: text}, ns)
		if err != nil {
			return "", err
		}
		_, lines, _ := strings.Cut(string(out), "\n\n")
		return lines, nil
	}
}

// ed25519Sign cosigns (cosignature/v1) with priv under name, timestamped
// now.
func ed25519Sign(name string, priv ed25519.PrivateKey) func(string, checkpoint.Checkpoint) (string, error) {
	return func(text string, _ checkpoint.Checkpoint) (string, error) {
		v, err := checkpoint.ParseCosignerKey(checkpoint.CosignatureVerifierKey(name, priv.Public().(ed25519.PublicKey)))
		if err != nil {
			return "", err
		}
		ts := uint64(time.Now().Unix())
		b := binary.BigEndian.AppendUint32(nil, v.KeyHash())
		b = binary.BigEndian.AppendUint64(b, ts)
		b = append(b, ed25519.Sign(priv, checkpoint.CosignedMessage(ts, []byte(text)))...)
		return "— " + name + " " + base64.StdEncoding.EncodeToString(b) + "\n", nil
	}
}

// relabelled makes sign's lines claim key ID id: a signature by another
// key (or algorithm) presented as the configured key's.
func relabelled(id uint32, sign func(string, checkpoint.Checkpoint) (string, error)) func(string, checkpoint.Checkpoint) (string, error) {
	return func(text string, c checkpoint.Checkpoint) (string, error) {
		lines, err := sign(text, c)
		if err != nil {
			return "", err
		}
		var out strings.Builder
		for _, l := range strings.SplitAfter(lines, "\n") {
			if l == "" {
				continue
			}
			name, b64, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(l, "— "), "\n"), " ")
			b, err := base64.StdEncoding.DecodeString(b64)
			if err != nil || len(b) < 4 {
				return "", errors.New("malformed signature line")
			}
			binary.BigEndian.PutUint32(b, id)
			fmt.Fprintf(&out, "— %s %s\n", name, base64.StdEncoding.EncodeToString(b))
		}
		return out.String(), nil
	}
}

func mldsaSigner(t *testing.T, name, label string) *checkpoint.MLDSA44Signer {
	t.Helper()
	seed := sha256.Sum256([]byte(label))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return checkpoint.NewMLDSA44Signer(name, k.MLDSA44)
}

func keyID(t *testing.T, vkey string) uint32 {
	t.Helper()
	v, err := checkpoint.ParseCosignerKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return v.KeyHash()
}

// TestPublisherMLDSA44Witness runs a log with an Ed25519 witness
// (litewitness), an ML-DSA-44 witness, and three that answer with lines
// that must not count: another ML-DSA-44 key's cosignature under the
// configured key's ID, an Ed25519 cosignature under an ML-DSA-44 key's ID,
// and an ML-DSA-44 cosignature under an Ed25519 key's ID (all three with
// the configured name). The published checkpoints carry exactly the two
// good cosignatures, which meet a quorum of 2, and the bad witnesses'
// requests are errors.
func TestPublisherMLDSA44Witness(t *testing.T) {
	e := newLogEnv(t)
	live := witnesstest.Start(t, "witness.test/live", witnesstest.Log{Origin: origin, Key: e.vkey})

	pq := mldsaSigner(t, "witness.test/pq", "pq witness")
	pqW := startFakeWitness(t, e.verify, mldsaSign(pq))

	// Another ML-DSA-44 key, presented as the configured one.
	impKey := mldsaSigner(t, "witness.test/impostor", "configured impostor key").VerifierKey()
	impW := startFakeWitness(t, e.verify, relabelled(keyID(t, impKey), mldsaSign(mldsaSigner(t, "witness.test/impostor", "real impostor key"))))

	// An Ed25519 cosignature under the ML-DSA-44 key's ID.
	mixKey := mldsaSigner(t, "witness.test/mixed", "mixed key").VerifierKey()
	edPriv := ed25519.NewKeyFromSeed(make([]byte, 32))
	mixW := startFakeWitness(t, e.verify, relabelled(keyID(t, mixKey), ed25519Sign("witness.test/mixed", edPriv)))

	// An ML-DSA-44 cosignature under an Ed25519 key's ID.
	edKey := checkpoint.CosignatureVerifierKey("witness.test/ed", edPriv.Public().(ed25519.PublicKey))
	edW := startFakeWitness(t, e.verify, relabelled(keyID(t, edKey), mldsaSign(mldsaSigner(t, "witness.test/ed", "pq under ed"))))

	reg := prometheus.NewRegistry()
	p := newPublisher(t, e, reg, 5*time.Second, 2,
		Witness{URL: live.URL, Key: live.VerifierKey},
		Witness{URL: pqW.URL, Key: pq.VerifierKey()},
		Witness{URL: impW.URL, Key: impKey},
		Witness{URL: mixW.URL, Key: mixKey},
		Witness{URL: edW.URL, Key: edKey})
	seq, _ := e.run(t, p)
	// published verifies the note with every configured key: a bad line
	// the publisher kept would make it fail (a known key's invalid
	// signature), not just go uncounted.
	all := []*witnesstest.Witness{live, {VerifierKey: pq.VerifierKey()}, {VerifierKey: impKey}, {VerifierKey: mixKey}, {VerifierKey: edKey}}
	want := []string{"witness.test/live", "witness.test/pq"}
	add(t, seq, 0, 20)
	e.waitPublished(t, 20, want, all...)
	// A second checkpoint: the ML-DSA-44 witness checks the consistency
	// proof from the size it cosigned.
	add(t, seq, 20, 7)
	cp := e.waitPublished(t, 27, want, all...)
	if got := testutil.ToFloat64(p.metrics.quorum); got != 1 {
		t.Errorf("mosaic_witness_quorum_met = %v, want 1", got)
	}
	if got := testutil.ToFloat64(p.metrics.cosignatures); got != 2 {
		t.Errorf("mosaic_checkpoint_cosignatures = %v, want 2", got)
	}
	st := p.Statuses()
	if st[1].LastError != "" || st[1].Size < cp.Size {
		t.Errorf("ML-DSA-44 witness status %+v", st[1])
	}
	for _, s := range st[2:] {
		if !strings.Contains(s.LastError, "no valid cosignature") || !s.LastSuccess.IsZero() {
			t.Errorf("witness %s: status %+v, want no success and an invalid cosignature", s.Name, s)
		}
		if n := testutil.ToFloat64(p.metrics.requests.WithLabelValues(s.Name, "ok")); n != 0 {
			t.Errorf("witness %s: %v requests counted ok", s.Name, n)
		}
	}
}
