package witnesstest

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
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

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
)

// SignFunc returns the signature lines a witness answers for the
// checkpoint note text (c parsed from it).
type SignFunc func(text string, c checkpoint.Checkpoint) (string, error)

// Fake is an add-checkpoint server (c2sp.org/tlog-witness) whose
// cosignatures are made by sign. It is a stand-in at the witness boundary:
// no independent ML-DSA-44 witness runs in CI yet (the litewitness Start
// runs signs with an Ed25519 key from an ssh-agent; Sunlight v0.9.0's
// witness is the interop step for a later session), so the ML-DSA-44 witness is built here from
// checkpoint.NewMLDSA44Signer, whose signed message TestSunlightInterop
// checks against torchwood's cosigner. It keeps the protocol's state
// honestly: 409 with its size for a wrong old size, and it checks the
// consistency proof against the tree it last cosigned.
type Fake struct {
	URL    string
	verify func([]byte) (*checkpoint.Verified, error)
	sign   SignFunc

	mu   sync.Mutex
	size int64
	hash tlog.Hash
}

// StartFake runs a Fake on loopback until the test ends. verify opens
// the log's checkpoints.
func StartFake(t testing.TB, verify func([]byte) (*checkpoint.Verified, error), sign SignFunc) *Fake {
	t.Helper()
	w := &Fake{verify: verify, sign: sign}
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

func (w *Fake) addCheckpoint(rw http.ResponseWriter, r *http.Request) {
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

// MLDSA44Cosigner cosigns with s, timestamped now.
func MLDSA44Cosigner(s *checkpoint.MLDSA44Signer) SignFunc {
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

// Ed25519Cosigner cosigns (cosignature/v1) with priv under name, timestamped
// now.
func Ed25519Cosigner(name string, priv ed25519.PrivateKey) SignFunc {
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

// Relabelled makes sign's lines claim key ID id: a signature by another
// key (or algorithm) presented as the configured key's, for tests that a
// client never counts it.
func Relabelled(id uint32, sign SignFunc) SignFunc {
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
