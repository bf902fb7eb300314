package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/certificate-transparency-go/tls"
	"golang.org/x/mod/sumdb/note"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
	"github.com/mosaic-ct/mosaic/internal/network/witness/witnesstest"
	"github.com/mosaic-ct/mosaic/internal/testkit/testenv"
	"github.com/mosaic-ct/mosaic/internal/tools/testca"
	"github.com/mosaic-ct/mosaic/staticct"
)

// The interoperability tests run Sunlight (testenv.SunlightVersion), an
// independent Static CT log, witness and client, and Tessera's witness
// client (which Sunlight lacks), against the real mosaic binary, all on
// loopback. scripts/sunlight.sh builds and caches their binaries; without
// them the tests skip (fail under CI).

// interopTimeout bounds each interop test's processes and reads.
const interopTimeout = 2 * time.Minute

// sunlightRead is the output of sunlight_read (scripts/sunlight_read.go):
// a log read with Sunlight's client package.
type sunlightRead struct {
	Origin   string   `json:"origin"`
	Size     int64    `json:"size"`
	RootHash []byte   `json:"root_hash"`
	Verified []string `json:"verified"`
	Entries  []struct {
		Index     int64    `json:"index"`
		LeafHash  []byte   `json:"leaf_hash"`
		Timestamp int64    `json:"timestamp"`
		Precert   bool     `json:"precert"`
		Issuers   []string `json:"issuers"`
	} `json:"entries"`
	SCTs  []int64 `json:"scts"`
	Names *struct {
		Read          int64      `json:"read"`
		FromDataTiles bool       `json:"from_data_tiles"`
		Differ        []int64    `json:"differ"`
		DNS           [][]string `json:"dns"`
	} `json:"names"`
}

// vkeyFlags returns a -vkey flag for each vkey.
func vkeyFlags(vkeys ...string) []string {
	var f []string
	for _, vk := range vkeys {
		f = append(f, "-vkey", vk)
	}
	return f
}

// runSunlightRead reads the dev log with Sunlight's client, given more
// flags (-vkey, -sct); it returns the read, or the tool's output and false
// when it failed.
func runSunlightRead(t *testing.T, sl *testenv.Sunlight, s *devServer, flags ...string) (*sunlightRead, string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	args := append([]string{"-monitoring", s.info.MonitoringPrefix, "-pubkey", s.info.PublicKey}, flags...)
	cmd := exec.CommandContext(ctx, sl.Bin("sunlight_read"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Sprintf("%v: %s", err, stderr.String()), false
	}
	var r sunlightRead
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("sunlight_read printed no JSON: %v\n%s", err, out)
	}
	return &r, "", true
}

// TestInteropSunlightReadsNamesTiles: Sunlight's client reads a Mosaic
// log's names tiles (UnauthenticatedTrimmedEntries, without falling back
// to the data tiles) and gets, for every entry, exactly the TrimmedEntry
// it makes itself from the entry in the data tiles; the DNS names of
// chosen submissions are where their SCTs say. With names_tiles: false the
// same client falls back to the data tiles, which shows the first part of
// the test reads names tiles indeed.
func TestInteropSunlightReadsNamesTiles(t *testing.T) {
	sl := testenv.FindSunlight(t)
	dir := t.TempDir()
	s := startDev(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, mosaicBinary(t), "hammer", "-dev", dir, "-count", "300",
		"-rate", "0", "-workers", "8", "-precert", "0.5", "-dup", "0", "-ui=false", "-drain", "60s").CombinedOutput(); err != nil {
		t.Fatalf("hammer: %v\n%s", err, out)
	}
	ca := newCAs(t, s)
	subs := []*submission{
		{name: "certificate", chain: [][]byte{leaf(t, ca.ecInt, "cert.names.example", testca.LeafOptions{}), ca.ecInt.DER}},
		{name: "precert", precert: true, chain: [][]byte{leaf(t, ca.rsaInt, "pre.names.example", testca.LeafOptions{Precert: true}), ca.rsaInt.DER}},
	}
	client := newClient(t, s)
	for _, sub := range subs {
		submit(t, client, sub)
	}
	size := s.waitForSize(t, 302).Size
	r, out, ok := runSunlightRead(t, sl, s, "-names")
	if !ok {
		t.Fatalf("sunlight_read -names: %s", out)
	}
	if r.Names == nil || r.Names.Read != size || r.Names.FromDataTiles || len(r.Names.Differ) != 0 {
		t.Fatalf("Sunlight's client read %+v names of a tree of %d; want every entry, from the names tiles, none differing from the data tiles'", r.Names, size)
	}
	for i, want := range []string{"cert.names.example", "pre.names.example"} {
		if dns := r.Names.DNS[subs[i].index(t)]; len(dns) != 1 || dns[0] != want {
			t.Errorf("%s: the names tile has DNS names %q at its index, want %s", subs[i].name, dns, want)
		}
	}

	// Without names tiles, the client falls back to the data tiles.
	s.stop()
	setDevLogField(t, dir, "names_tiles", false)
	if err := os.RemoveAll(filepath.Join(dir, "data", "tile", "names")); err != nil {
		t.Fatal(err)
	}
	s = startDev(t, dir)
	r, out, ok = runSunlightRead(t, sl, s, "-names")
	if !ok {
		t.Fatalf("sunlight_read -names on a log without names tiles: %s", out)
	}
	if r.Names == nil || !r.Names.FromDataTiles || r.Names.Read != size {
		t.Errorf("on a log without names tiles Sunlight's client read %+v; want every entry, from the data tiles", r.Names)
	}
}

// otherMLDSA44VKey is the ML-DSA-44 vkey, for origin, of a key that is not
// the log's.
func otherMLDSA44VKey(t *testing.T, origin string) string {
	t.Helper()
	seed := sha256.Sum256([]byte("interop: not the log's key"))
	k, err := keys.FromSeed(seed[:])
	if err != nil {
		t.Fatal(err)
	}
	return checkpoint.NewMLDSA44Signer(origin, k.MLDSA44).VerifierKey()
}

// TestInteropSunlightClientReadsMosaic: Sunlight's client
// (filippo.io/sunlight.Client) reads a Mosaic dev log filled by the hammer
// (certificates and precertificates, more than one data tile) and three
// chosen submissions: its own RFC 6962 verifier accepts the checkpoint,
// the note and torchwood cosignature verifiers accept the Ed25519 and
// ML-DSA-44 lines with the vkeys dev.json lists, every entry and issuer it
// reads (authenticated against the checkpoint) matches what Mosaic's
// staticct client reads, and its CheckInclusion accepts the SCTs of a
// certificate, a precertificate and a precertificate issued through a
// Precertificate Signing Certificate. Given another key's ML-DSA-44 vkey
// for the log's origin, or an SCT with one bit of its signature flipped,
// Sunlight's client refuses.
func TestInteropSunlightClientReadsMosaic(t *testing.T) {
	sl := testenv.FindSunlight(t)
	dir := t.TempDir()
	s := startDev(t, dir)
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	report := filepath.Join(t.TempDir(), "report.json")
	if out, err := exec.CommandContext(ctx, mosaicBinary(t), "hammer", "-dev", dir, "-count", fmt.Sprint(n),
		"-rate", "0", "-workers", "8", "-precert", "0.5", "-dup", "0", "-ui=false", "-drain", "60s", "-report", report).CombinedOutput(); err != nil {
		t.Fatalf("hammer: %v\n%s", err, out)
	}
	ca := newCAs(t, s)
	subs := []*submission{
		{name: "certificate", chain: [][]byte{leaf(t, ca.ecInt, "cert.interop.example", testca.LeafOptions{}), ca.ecInt.DER}},
		{name: "precert", precert: true, chain: [][]byte{leaf(t, ca.rsaInt, "pre.interop.example", testca.LeafOptions{Precert: true}), ca.rsaInt.DER}},
		{name: "precert via precert signing cert", precert: true, chain: [][]byte{leaf(t, ca.psc, "psc.interop.example", testca.LeafOptions{Precert: true}), ca.psc.DER, ca.ecInt.DER}},
	}
	client := newClient(t, s)
	var sctFlags []string
	for _, sub := range subs {
		submit(t, client, sub)
		b, err := tls.Marshal(*sub.sct)
		if err != nil {
			t.Fatal(err)
		}
		sctFlags = append(sctFlags, "-sct", base64.StdEncoding.EncodeToString(b))
	}
	cp := s.waitForSize(t, n+int64(len(subs)))

	if len(s.info.CheckpointVKeys) != 2 {
		t.Fatalf("dev.json checkpoint_vkeys = %q, want the Ed25519 and ML-DSA-44 vkeys", s.info.CheckpointVKeys)
	}
	r, out, ok := runSunlightRead(t, sl, s, append(vkeyFlags(s.info.CheckpointVKeys...), sctFlags...)...)
	if !ok {
		t.Fatalf("Sunlight's client on the Mosaic log: %s", out)
	}
	for i, sub := range subs {
		if i >= len(r.SCTs) || r.SCTs[i] != int64(sub.index(t)) {
			t.Fatalf("Sunlight's client found the SCTs' entries at %v; the SCT of %s names %d", r.SCTs, sub.name, sub.index(t))
		}
	}
	if r.Origin != s.info.Origin || r.Size != cp.Size || [32]byte(r.RootHash) != [32]byte(cp.Hash) {
		t.Fatalf("Sunlight read %s size %d root %x; Mosaic's checkpoint is %s size %d root %x",
			r.Origin, r.Size, r.RootHash, s.info.Origin, cp.Size, cp.Hash[:])
	}
	if len(r.Verified) != 2 || r.Verified[0] != s.info.Origin || r.Verified[1] != s.info.Origin {
		t.Errorf("Sunlight verified signatures by %q, want the log's two vkeys (named %s)", r.Verified, s.info.Origin)
	}

	// The same entries through Mosaic's own client, tile by tile.
	c, err := staticct.New(staticct.Config{MonitoringPrefix: s.info.MonitoringPrefix, PublicKey: s.publicKey(t),
		Origin: s.info.Origin, CheckpointKeys: s.info.CheckpointVKeys})
	if err != nil {
		t.Fatal(err)
	}
	mcp, err := c.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mcp.Size != r.Size {
		t.Fatalf("Mosaic's client read size %d, Sunlight's %d", mcp.Size, r.Size)
	}
	if int64(len(r.Entries)) != r.Size {
		t.Fatalf("Sunlight's client read %d entries of %d", len(r.Entries), r.Size)
	}
	precerts := 0
	for start := int64(0); start < r.Size; start += tile.Width {
		w := int(min(tile.Width, r.Size-start))
		entries, err := c.DataTile(ctx, staticct.Tile{Data: true, N: start / tile.Width, W: w})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range entries {
			got := r.Entries[start+int64(i)]
			h := e.LeafHash()
			var issuers []string
			for _, fp := range e.ChainFingerprints {
				issuers = append(issuers, hex.EncodeToString(fp[:]))
			}
			if got.Index != int64(e.LeafIndex) || [32]byte(got.LeafHash) != [32]byte(h) ||
				got.Timestamp != int64(e.Timestamp) || got.Precert != e.IsPrecert ||
				strings.Join(got.Issuers, ",") != strings.Join(issuers, ",") {
				t.Fatalf("entry %d: Sunlight's client read %+v; Mosaic's: index %d leaf hash %x timestamp %d precert %v issuers %v",
					start+int64(i), got, e.LeafIndex, h[:], e.Timestamp, e.IsPrecert, issuers)
			}
			if e.IsPrecert {
				precerts++
			}
		}
	}
	if hp := precerts - 2; hp <= 0 || hp >= n { // two of subs are precertificates
		t.Errorf("%d of the hammer's %d entries are precertificates; it was asked for about half", hp, n)
	}

	// Sunlight's verifier does check the ML-DSA-44 line: another key's
	// vkey under the log's origin is refused.
	if _, out, ok := runSunlightRead(t, sl, s, vkeyFlags(otherMLDSA44VKey(t, s.info.Origin))...); ok || !strings.Contains(out, "checkpoint with vkey") {
		t.Fatalf("Sunlight's client with another ML-DSA-44 key's vkey: accepted (ok=%v), want a refusal\n%s", ok, out)
	}
	// And does check the SCT's signature.
	bad := *subs[0].sct
	bad.Signature.Signature = bytes.Clone(bad.Signature.Signature)
	bad.Signature.Signature[len(bad.Signature.Signature)-1] ^= 1
	b, err := tls.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, out, ok := runSunlightRead(t, sl, s, "-sct", base64.StdEncoding.EncodeToString(b)); ok || !strings.Contains(out, "SCT #1") {
		t.Fatalf("Sunlight's client with a tampered SCT: accepted (ok=%v), want a refusal\n%s", ok, out)
	}
}

// sunlightLog is a running Sunlight process with one log (and, if asked,
// its witness), on 127.0.0.1.
type sunlightLog struct {
	dir        string // its files: seeds, databases, config, data/
	port       int
	origin     string // 127.0.0.1/interop
	submission string // http://127.0.0.1:PORT/interop/
	pubkey     string // base64 DER
	vkey       string // the log's ML-DSA-44 vkey, from sunlight-keygen
	output     *testenv.Output
	// With a witness: its name and vkeys, from sunlight-keygen -witness.
	witnessURL     string // submission prefix, http://127.0.0.1:PORT/witness/
	witnessEd25519 string
	witnessMLDSA44 string
	mirrorMLDSA44  string // with a mirror: its vkey (sunlight-keygen -mirror)
}

// sunlightMirrorName is the cosigner name of Sunlight's mirror.
const sunlightMirrorName = "mirror.interop.test"

// sunlightWitnessName is the cosigner name of Sunlight's witness.
const sunlightWitnessName = "witness.interop.test"

// sunlightOptions configures startSunlight.
type sunlightOptions struct {
	// roots and window are the log's accepted roots (PEM file) and
	// NotAfter window (RFC 3339).
	roots, notAfterStart, notAfterLimit string
	// witnessLogList, if set, is a c2sp.org witness-network log list
	// (logs/v0) file: Sunlight also runs its witness, for those logs.
	witnessLogList string
	// mirrorLogList, with witnessLogList, makes the witness a mirror
	// (c2sp.org/tlog-mirror) too, for the logs of this list.
	mirrorLogList string
}

// keygenJSON runs sunlight-keygen -json with args and returns its fields.
func keygenJSON(t *testing.T, sl *testenv.Sunlight, args ...string) map[string]string {
	t.Helper()
	out, err := exec.Command(sl.Bin("sunlight-keygen"), append([]string{"-json"}, args...)...).Output()
	if err != nil {
		t.Fatalf("sunlight-keygen %q: %v", args, err)
	}
	var m map[string]string
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("sunlight-keygen %q printed no JSON: %v\n%s", args, err, out)
	}
	return m
}

// startSunlight starts Sunlight with a log (always: Sunlight exits at once
// when it runs no log) and optionally its witness, and waits until it
// serves.
//
// Sunlight requires https submission prefixes and, without an acme
// section, serves plain HTTP; it routes by the prefixes' host and path
// through Go's ServeMux, which matches the host without the port. So the
// prefixes are https://127.0.0.1/interop and https://127.0.0.1/witness,
// the clients use http://127.0.0.1:PORT/..., and the log's origin is
// 127.0.0.1/interop. Its monitoring prefix is its local directory
// (file://): Sunlight serves no tiles itself.
func startSunlight(t *testing.T, sl *testenv.Sunlight, o sunlightOptions) *sunlightLog {
	t.Helper()
	dir := t.TempDir()
	testenv.ClearImmutable(t, dir) // Sunlight, as root, marks its seeds and tiles immutable
	l := &sunlightLog{dir: dir, origin: "127.0.0.1/interop"}
	if out, err := exec.Command(sl.Bin("sunlight_mkdb"), filepath.Join(dir, "checkpoints.db")).CombinedOutput(); err != nil {
		t.Fatalf("sunlight_mkdb: %v\n%s", err, out)
	}
	k := keygenJSON(t, sl, "-f", filepath.Join(dir, "seed.bin"), "-log", "https://"+l.origin)
	pem := k["public_key_ecdsa_spki_pem"]
	pem = strings.TrimPrefix(strings.TrimSpace(pem), "-----BEGIN PUBLIC KEY-----")
	pem = strings.TrimSuffix(pem, "-----END PUBLIC KEY-----")
	l.pubkey = strings.ReplaceAll(pem, "\n", "")
	l.vkey = k["vkey_mldsa44"]
	if l.pubkey == "" || l.vkey == "" {
		t.Fatalf("sunlight-keygen printed no public key or ML-DSA-44 vkey: %v", k)
	}
	witness := ""
	if o.witnessLogList != "" {
		args := []string{"-f", filepath.Join(dir, "witness-seed.bin"), "-witness", sunlightWitnessName}
		if o.mirrorLogList != "" {
			args = append(args, "-mirror", sunlightMirrorName)
		}
		wk := keygenJSON(t, sl, args...)
		l.mirrorMLDSA44 = wk["mirror_vkey_mldsa44"]
		if o.mirrorLogList != "" && l.mirrorMLDSA44 == "" {
			t.Fatalf("sunlight-keygen -mirror printed no mirror vkey: %v", wk)
		}
		l.witnessEd25519, l.witnessMLDSA44 = wk["witness_vkey_ed25519"], wk["witness_vkey_mldsa44"]
		if l.witnessEd25519 == "" || l.witnessMLDSA44 == "" {
			t.Fatalf("sunlight-keygen -witness printed no Ed25519 or ML-DSA-44 vkey: %v", wk)
		}
		witness = fmt.Sprintf(`witness:
  name: %s
  submissionprefix: https://127.0.0.1/witness
  monitoringprefix: file://%s/witness
  secret: %s/witness-seed.bin
  localdirectory: %s/witness
  loglists:
    - %s
`, sunlightWitnessName, dir, dir, dir, o.witnessLogList)
		if o.mirrorLogList != "" {
			witness += fmt.Sprintf(`  mirrorname: %s
  mirrorloglists:
    - %s
`, sunlightMirrorName, o.mirrorLogList)
		}
	}
	cfg := filepath.Join(dir, "sunlight.yaml")
	for try := 0; ; try++ {
		l.port = freePort(t)
		yaml := fmt.Sprintf(`listen:
  - 127.0.0.1:%d
checkpoints: %s/checkpoints.db
logs:
  - shortname: interop
    inception: %s
    submissionprefix: https://%s
    monitoringprefix: file://%s/data
    secret: %s/seed.bin
    period: 100
    poolsize: 1000
    cache: %s/cache.db
    localdirectory: %s/data
    roots: %s
    notafterstart: %s
    notafterlimit: %s
%s`, l.port, dir, time.Now().Format(time.DateOnly), l.origin, dir, dir, dir, dir,
			o.roots, o.notAfterStart, o.notAfterLimit, witness)
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		err := l.start(t, sl, cfg)
		if err == nil {
			break
		}
		if try == 2 {
			t.Fatalf("Sunlight did not start: %v\n%s", err, l.output.String())
		}
		t.Logf("Sunlight did not start (%v); retrying on another port", err)
	}
	l.submission = fmt.Sprintf("http://127.0.0.1:%d/interop/", l.port)
	if o.witnessLogList != "" {
		l.witnessURL = fmt.Sprintf("http://127.0.0.1:%d/witness/", l.port)
		// The witness reads its log list in the background after it
		// starts serving: wait for it (Sunlight v0.9.0 logs each log it
		// adds), so that no add-checkpoint meets a witness that does not
		// know the log yet.
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(l.output.String(), "adding new log to witness config") {
			if time.Now().After(deadline) {
				t.Fatalf("Sunlight's witness did not load its log list within 30s\n%s", l.output.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return l
}

// start runs Sunlight with the config file, in dir (where -testcert would
// look for its files; it is not used), and waits until its log serves
// get-roots. The process is killed at the end of the test.
func (l *sunlightLog) start(t *testing.T, sl *testenv.Sunlight, cfg string) error {
	cmd := exec.Command(sl.Bin("sunlight"), "-c", cfg)
	cmd.Dir = l.dir
	l.output = &testenv.Output{}
	cmd.Stdout, cmd.Stderr = l.output, l.output
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("Sunlight's output:\n%s", l.output.String())
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/interop/ct/v1/get-roots", l.port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-done:
			done <- err // for the cleanup
			return fmt.Errorf("sunlight exited: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within 30s", url)
		}
	}
}

// TestInteropHammerAndFsckOnSunlight: Mosaic's hammer submits
// certificates and precertificates to a Sunlight log and verifies its SCTs
// and checkpoints (the ML-DSA-44 line with the vkey sunlight-keygen
// prints, as -vkey), and fsck checks the whole log from Sunlight's storage
// with that vkey; given another key's ML-DSA-44 vkey, fsck fails.
func TestInteropHammerAndFsckOnSunlight(t *testing.T) {
	sl := testenv.FindSunlight(t)
	// A stopped dev log lends its test CA, roots and NotAfter window.
	_, dev, _, _ := stoppedDevLog(t)
	l := startSunlight(t, sl, sunlightOptions{roots: dev.info.Roots,
		notAfterStart: dev.info.NotAfterStart, notAfterLimit: dev.info.NotAfterLimit})

	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, mosaicBinary(t), args...).CombinedOutput()
		return string(out), err
	}
	monitoring := "file://" + filepath.Join(l.dir, "data")
	const n = 50
	report := filepath.Join(t.TempDir(), "report.json")
	out, err := run("hammer", "-submission", l.submission, "-monitoring", monitoring, "-pubkey", l.pubkey,
		"-origin", l.origin, "-vkey", l.vkey, "-ca-cert", dev.info.TestCACert, "-ca-key", dev.info.TestCAKey,
		"-not-after-start", dev.info.NotAfterStart, "-not-after-limit", dev.info.NotAfterLimit,
		"-count", fmt.Sprint(n), "-rate", "0", "-workers", "4", "-precert", "0.5", "-dup", "0",
		"-ui=false", "-drain", "60s", "-report", report)
	if err != nil {
		t.Fatalf("hammer against Sunlight: %v\n%s", err, out)
	}
	// Every submission accepted, and every SCT, checkpoint and inclusion
	// verified.
	var rep struct {
		Accepted             int64 `json:"accepted"`
		VerificationFailures int64 `json:"verification_failures"`
		InclusionsVerified   int64 `json:"inclusions_verified"`
	}
	if b, err := os.ReadFile(report); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("hammer report: %v\n%s", err, b)
	}
	if rep.Accepted != n || rep.InclusionsVerified != n || rep.VerificationFailures != 0 {
		t.Fatalf("hammer against Sunlight: %+v, want %d accepted and verified, no verification failure\n%s", rep, n, out)
	}

	fsck := func(vkey string) (string, error) {
		return run("fsck", "-monitoring", monitoring, "-pubkey", l.pubkey, "-origin", l.origin,
			"-vkey", vkey, "-progress=false")
	}
	out, err = fsck(l.vkey)
	if err != nil {
		t.Fatalf("fsck of the Sunlight log with its ML-DSA-44 vkey: %v\n%s", err, out)
	}
	if !strings.Contains(out, "checked:") {
		t.Fatalf("fsck printed no checked: line\n%s", out)
	}
	t.Logf("fsck: %s", strings.TrimSpace(out))
	out, err = fsck(otherMLDSA44VKey(t, l.origin))
	if err == nil || !strings.Contains(out, "missing a valid signature by the required key") {
		t.Fatalf("fsck of the Sunlight log with another key's ML-DSA-44 vkey: %v, want a failure naming the signature\n%s", err, out)
	}

	// Mosaic's mirror copies the Sunlight log (pull mode, from its
	// storage), and fsck checks the copy with Sunlight's keys.
	mirrored := mirrorSunlight(t, l)
	out, err = run("fsck", "-monitoring", mirrored, "-pubkey", l.pubkey, "-origin", l.origin,
		"-vkey", l.vkey, "-progress=false")
	if err != nil || !strings.Contains(out, "checked:") {
		t.Fatalf("fsck of Mosaic's mirror of the Sunlight log: %v\n%s", err, out)
	}
	t.Logf("fsck of the mirror's copy: %s", strings.TrimSpace(out))
}

// mirrorSunlight runs `mosaic serve` with a mirror section that pulls the
// Sunlight log l from its storage, waits until the mirror's copy has all
// of l's entries under a checkpoint carrying Sunlight's ML-DSA-44
// signature and the mirror's two cosignatures, and returns the copy's
// monitoring prefix.
func mirrorSunlight(t *testing.T, l *sunlightLog) string {
	t.Helper()
	mdir := t.TempDir()
	cs := writeMirrorKey(t, mdir, 43, "mirror.test/sunlight")
	port := freePort(t)
	prefix := fmt.Sprintf("http://127.0.0.1:%d/mirror/", port)
	storage := "file://" + filepath.Join(l.dir, "data") + "/"
	cfg := fmt.Sprintf(`listen:
  - address: 127.0.0.1:%d
mirror:
  name: mirror.test/sunlight
  key: mirror.key
  prefix: %s
  storage:
    dir: tiles
  logs:
    - origin: %s
      keys: [%s]
      public_key: %s
      pull: %s
      pull_interval: 1s
`, port, prefix, l.origin, l.vkey, l.pubkey, storage)
	path := filepath.Join(mdir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m := launch(t, []string{"serve", "-config", path}, nil)
	t.Cleanup(m.stop)
	want, err := os.ReadFile(filepath.Join(l.dir, "data", "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	wantCP, err := checkpoint.Parse(want[:bytes.Index(want, []byte("\n\n"))+1])
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(l.origin))
	base := prefix + hex.EncodeToString(h[:]) + "/"
	vs := []note.Verifier{}
	for _, k := range append([]string{l.vkey}, cs.VerifierKeys()...) {
		v, err := checkpoint.ParseVerifierKey(k)
		if err != nil {
			if v, err = checkpoint.ParseCosignerKey(k); err != nil {
				t.Fatal(err)
			}
		}
		vs = append(vs, v)
	}
	deadline := time.Now().Add(interopTimeout)
	for {
		var got []byte
		resp, err := http.Get(base + "checkpoint")
		if err == nil {
			got, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if n, err := note.Open(got, note.VerifierList(vs...)); err == nil && len(n.Sigs) == 3 {
					if cp, err := checkpoint.Parse([]byte(n.Text)); err == nil && cp.Size >= wantCP.Size {
						return base
					}
				}
			}
		}
		select {
		case err := <-m.done:
			t.Fatalf("the mirror exited: %v\n%s", err, m.logBuf.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mirror's copy of the Sunlight log did not reach size %d with Sunlight's and the mirror's signatures within %v; last checkpoint:\n%s\n%s", wantCP.Size, interopTimeout, got, m.logBuf.String())
		}
	}
}

// TestInteropSunlightWitnessCosignsMosaic: Mosaic's witness publisher
// (witnesses in the log's config) gets cosignatures from Sunlight's
// witness, both its Ed25519 (cosignature/v1) and its ML-DSA-44 key, listed
// as one witness with two keys. Sunlight's witness
// knows the log from a logs/v0 list giving the log's ML-DSA-44 vkey, so
// it verifies Mosaic's ML-DSA-44 checkpoint signature and consistency
// proofs. The published checkpoint carries both cosignatures; they verify
// with the vkeys sunlight-keygen prints, with Mosaic's verifier, fsck, and
// Sunlight's own client (torchwood's cosignature verifier).
func TestInteropSunlightWitnessCosignsMosaic(t *testing.T) {
	sl := testenv.FindSunlight(t)
	dir, dev, _, _ := stoppedDevLog(t)
	list, _ := mldsaLogList(t, dev)
	l := startSunlight(t, sl, sunlightOptions{roots: dev.info.Roots,
		notAfterStart: dev.info.NotAfterStart, notAfterLimit: dev.info.NotAfterLimit, witnessLogList: list})

	// One entry with both of the witness's keys: one request per
	// checkpoint collects both cosignatures.
	setDevLogField(t, dir, "witnesses", map[string]any{"quorum": 1, "list": []map[string]any{
		{"name": "sunlight", "url": l.witnessURL, "keys": []string{l.witnessEd25519, l.witnessMLDSA44}},
	}})
	s := startDev(t, dir)
	ca := newCAs(t, s)
	submitN(t, s, ca, 5, "interop-witness")
	b := s.cosignedByKeys(t, 5, sunlightWitnessName, l.witnessEd25519, l.witnessMLDSA44)
	t.Logf("checkpoint cosigned by Sunlight's witness:\n%s", b)
	// A second checkpoint: sent with a consistency proof from the size
	// the witness cosigned, which Sunlight checks.
	submitN(t, s, ca, 3, "interop-witness-2")
	s.cosignedByKeys(t, 8, sunlightWitnessName, l.witnessEd25519, l.witnessMLDSA44)
	if v := s.metric(t, "mosaic_witness_quorum_met", `log="dev"`); v != 1 {
		t.Errorf("mosaic_witness_quorum_met = %v, want 1", v)
	}
	// Sunlight's witness never failed or refused a request: one request
	// per checkpoint, from the size it last cosigned.
	for _, r := range []string{"error", "timeout", "conflict"} {
		if v := s.metric(t, "mosaic_witness_requests_total", `witness="sunlight"`, `result="`+r+`"`); v != 0 {
			t.Errorf("mosaic_witness_requests_total{witness=\"sunlight\",result=%q} = %v, want 0", r, v)
		}
	}
	t.Logf("add-checkpoint requests to Sunlight's witness: %v ok", s.metric(t, "mosaic_witness_requests_total", `witness="sunlight"`, `result="ok"`))

	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	// fsck, one key at a time: its -witness-quorum counts witnesses by
	// name, and the two keys are one witness's.
	for _, wk := range []string{l.witnessEd25519, l.witnessMLDSA44} {
		out, err := exec.CommandContext(ctx, mosaicBinary(t), "fsck", "-dev", dir, "-progress=false", "-consistency-only",
			"-witness-key", wk).CombinedOutput()
		if err != nil {
			t.Fatalf("fsck -witness-key %.60s…: %v\n%s", wk, err, out)
		}
	}
	// Sunlight's own client verifies the cosignatures with torchwood.
	if _, out, ok := runSunlightRead(t, sl, s, vkeyFlags(l.witnessEd25519, l.witnessMLDSA44)...); !ok {
		t.Fatalf("Sunlight's client with its witness's vkeys: %s", out)
	}
}

// vkeyType returns a vkey's key type byte (0x01 Ed25519 note key, 0x04
// Ed25519 cosignature key, 0x06 ML-DSA-44), or 0 if it is malformed.
// mldsaLogList writes a witness-network log list ("logs/v0") naming the
// dev log by its origin and ML-DSA-44 vkey, as Sunlight's witness and
// mirror take them, and returns its path and that vkey.
func mldsaLogList(t *testing.T, dev *devServer) (path, vkey string) {
	t.Helper()
	var mlKey string
	for _, vk := range dev.info.CheckpointVKeys {
		if vkeyType(vk) == 0x06 {
			mlKey = vk
		}
	}
	if mlKey == "" {
		t.Fatalf("dev.json has no ML-DSA-44 vkey: %q", dev.info.CheckpointVKeys)
	}
	list := filepath.Join(t.TempDir(), "loglist")
	if err := os.WriteFile(list, []byte("logs/v0\nvkey "+mlKey+"\norigin "+dev.info.Origin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return list, mlKey
}

func vkeyType(vkey string) byte {
	_, rest, _ := strings.Cut(vkey, "+")
	_, b64, _ := strings.Cut(rest, "+") // the key's base64 may hold '+'
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// cosignedByKeys waits until the published checkpoint covers size entries
// and carries a valid cosignature by each of the vkeys, all of cosigner
// name (one witness's keys share its name, so they are checked one at a
// time), and returns it. The log must be quiet: the checkpoint returned
// is checked for every key.
func (s *devServer) cosignedByKeys(t *testing.T, size int64, name string, vkeys ...string) []byte {
	t.Helper()
	var b []byte
	for _, vk := range vkeys {
		b = s.cosignedBy(t, size, []string{name}, &witnesstest.Witness{VerifierKey: vk})
	}
	for _, vk := range vkeys {
		v, err := checkpoint.ParseCosignerKey(vk)
		if err != nil {
			t.Fatal(err)
		}
		if names, err := checkpoint.VerifyCosignatures(b, []note.Verifier{v}); err != nil || len(names) != 1 {
			t.Fatalf("published checkpoint: cosigned by %v (%v) with key %.60s…, want %s\n%s", names, err, vk, name, b)
		}
	}
	return b
}

// tesseraWitnessRun is the output of tessera_witness
// (scripts/tessera_witness.go): the checkpoints a Tessera log published,
// each cosigned by the witness.
type tesseraWitnessRun struct {
	Checkpoints []struct {
		Size              int64            `json:"size"`
		Checkpoint        string           `json:"checkpoint"`
		TesseraVerified   []string         `json:"tessera_verified"`
		TorchwoodVerified []string         `json:"torchwood_verified"`
		CosignedAt        map[string]int64 `json:"cosigned_at"`
	} `json:"checkpoints"`
}

// TestInteropTesseraWitnessClient: an independent witness client gets
// cosignatures from Mosaic's witness that its own verifier accepts.
// Sunlight v0.9.0 has a witness server but no witness client, so the
// client is Tessera v1.0.4's (tessera.WithWitnesses), run by
// tessera_witness as a log of 3 and then 7 entries: Tessera sends each
// checkpoint to the witness itself (the second from old size 3, with a
// consistency proof it builds from its tiles), checks the Ed25519
// cosignature with its own verifier and publishes the checkpoint only
// with it. Tessera v1.0.4 does not verify ML-DSA-44, so tessera_witness
// resends each checkpoint by hand and torchwood's verifier (Sunlight's)
// checks both of the witness's lines. A checkpoint signed by the same log
// key at the witnessed size with another root hash (a fork) is then
// refused, as is one that needs the witness to forget its state, and the
// witness's latest checkpoint stays the genuine one.
func TestInteropTesseraWitnessClient(t *testing.T) {
	sl := testenv.FindSunlight(t)
	dir := t.TempDir()
	const origin = "example.com/mosaic-interop/tessera"
	const name = "witness.example/tessera-interop"
	skey, logVKey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	skeyFile := filepath.Join(dir, "log.skey")
	if err := os.WriteFile(skeyFile, []byte(skey), 0o600); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "witness.key")
	w := startWitness(t, dir, keyFile, "", name, origin, []string{logVKey})
	edKey, mlKey := witnessVKeys(t, keyFile, name)

	ctx, cancel := context.WithTimeout(context.Background(), interopTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, sl.Bin("tessera_witness"), "-dir", filepath.Join(dir, "log"), "-skey", skeyFile,
		"-witness", w.url, "-ed25519", edKey, "-mldsa44", mlKey, "-sizes", "3,7", "-timeout", "90s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tessera_witness: %v\n%s\nwitness log:\n%s", err, stderr.String(), w.logBuf.String())
	}
	var run tesseraWitnessRun
	if err := json.Unmarshal(out, &run); err != nil {
		t.Fatalf("tessera_witness printed no JSON: %v\n%s", err, out)
	}
	if len(run.Checkpoints) != 2 || run.Checkpoints[0].Size != 3 || run.Checkpoints[1].Size != 7 {
		t.Fatalf("tessera_witness published %+v, want checkpoints of sizes 3 and 7", run.Checkpoints)
	}
	edVerifier, err := checkpoint.ParseCosignerKey(edKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range run.Checkpoints {
		if len(c.TesseraVerified) != 1 || c.TesseraVerified[0] != name {
			t.Errorf("size %d: Tessera's verifier accepted %q, want [%q]", c.Size, c.TesseraVerified, name)
		}
		if len(c.TorchwoodVerified) != 2 || c.TorchwoodVerified[0] != edKey || c.TorchwoodVerified[1] != mlKey {
			t.Errorf("size %d: torchwood's verifier accepted %q, want the Ed25519 and the ML-DSA-44 vkey", c.Size, c.TorchwoodVerified)
		}
		// The cosignature Tessera published verifies with Mosaic's own
		// verifier too: the bytes are the witness's, not rewritten.
		if n, err := note.Open([]byte(c.Checkpoint), note.VerifierList(edVerifier)); err != nil || len(n.Sigs) != 1 {
			t.Errorf("size %d: the published checkpoint's cosignature does not verify with Mosaic's verifier: %v\n%s", c.Size, err, c.Checkpoint)
		}
	}
	t.Logf("checkpoint Tessera published, cosigned by Mosaic's witness:\n%s", run.Checkpoints[1].Checkpoint)
	waddr := strings.TrimSuffix(strings.TrimPrefix(w.url, "http://"), "/witness/")
	sample := fmt.Sprintf(`mosaic_witness_server_cosigned_tree_size{log=%q}`, origin)
	if v, _ := metricAt(t, waddr, sample); v != 7 {
		t.Errorf("%s = %v, want 7", sample, v)
	}

	// A fork: the log's key signs another tree of the witnessed size.
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	forkHash := sha256.Sum256([]byte("a fork of the Tessera log"))
	fork, err := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n7\n%s\n", origin, base64.StdEncoding.EncodeToString(forkHash[:]))}, signer)
	if err != nil {
		t.Fatal(err)
	}
	post := func(body string) (int, string, string) {
		t.Helper()
		resp, err := http.Post(w.url+"add-checkpoint", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	// tlog-witness: same size, another root hash, is a 422.
	if code, _, body := post("old 7\n\n" + string(fork)); code != http.StatusUnprocessableEntity {
		t.Errorf("the fork at the witnessed size: %d %q, want 422", code, body)
	}
	// Sent as from a witness that forgot its state: a 409 naming the
	// size it holds, the answer Tessera's client resynchronizes from.
	if code, ct, body := post("old 0\n\n" + string(fork)); code != http.StatusConflict || ct != "text/x.tlog.size" || body != "7\n" {
		t.Errorf("the fork from old size 0: %d %q %q, want 409 text/x.tlog.size \"7\\n\"", code, ct, body)
	}
	sample = fmt.Sprintf(`mosaic_witness_server_requests_total{log=%q,result="inconsistent"}`, origin)
	if v, _ := metricAt(t, waddr, sample); v != 1 {
		t.Errorf("%s = %v, want 1 (the fork)", sample, v)
	}
	sum := sha256.Sum256([]byte(origin))
	resp, err := http.Get(w.url + hex.EncodeToString(sum[:]) + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	latest, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	genuine, _, _ := strings.Cut(run.Checkpoints[1].Checkpoint, "\n\n")
	if resp.StatusCode != 200 || !strings.HasPrefix(string(latest), genuine+"\n\n") {
		t.Errorf("the witness's latest checkpoint after the fork: %d\n%s\nwant the genuine one:\n%s", resp.StatusCode, latest, genuine)
	}
}

// TestInteropSunlightMirrorsMosaic: a Mosaic dev log pushes its entries to
// Sunlight v0.9.0's mirror (add-checkpoint, then add-entries with subtree
// consistency proofs), sending them as MerkleTreeLeaf records
// (mirrors[].entries: merkle_tree_leaf: Sunlight's mirror hashes entries as
// tlog records); the mirror takes all of them, and the push counts as done
// only on its ML-DSA-44 cosignature of the log's size. Sunlight's copy's
// checkpoint then carries the log's signature and the mirror's.
func TestInteropSunlightMirrorsMosaic(t *testing.T) {
	sl := testenv.FindSunlight(t)
	dir, dev, _, _ := stoppedDevLog(t)
	list, mlKey := mldsaLogList(t, dev)
	l := startSunlight(t, sl, sunlightOptions{roots: dev.info.Roots, notAfterStart: dev.info.NotAfterStart,
		notAfterLimit: dev.info.NotAfterLimit, witnessLogList: list, mirrorLogList: list})
	setDevLogField(t, dir, "mirrors", []map[string]any{{"name": "sunlight", "url": l.witnessURL,
		"keys": []string{l.mirrorMLDSA44}, "entries": "merkle_tree_leaf"}})
	s := startDev(t, dir)
	ca := newCAs(t, s)
	submitN(t, s, ca, 300, "interop-mirror")
	cp := s.waitForSize(t, 300)
	deadline := time.Now().Add(interopTimeout)
	for s.metric(t, "mosaic_mirror_pushed_tree_size", `mirror="sunlight"`) < float64(cp.Size) {
		if time.Now().After(deadline) {
			t.Fatalf("Sunlight's mirror did not cosign size %d within %v (add-entries ok %v, error %v)\nSunlight:\n%s", cp.Size, interopTimeout,
				s.metric(t, "mosaic_mirror_push_requests_total", `endpoint="add-entries"`, `result="ok"`),
				s.metric(t, "mosaic_mirror_push_requests_total", `endpoint="add-entries"`, `result="error"`), l.output.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v := s.metric(t, "mosaic_mirror_push_requests_total", `endpoint="add-entries"`, `result="error"`); v != 0 {
		t.Errorf("%v add-entries to Sunlight's mirror failed", v)
	}
	// Sunlight's copy, in its storage: the checkpoint under the
	// mirror's monitoring prefix verifies with the log's ML-DSA-44 key
	// and the mirror's.
	h := sha256.Sum256([]byte(dev.info.Origin))
	b, err := os.ReadFile(filepath.Join(l.dir, "witness", "mirror", hex.EncodeToString(h[:]), "checkpoint"))
	if err != nil {
		t.Fatalf("Sunlight's mirror's copy: %v", err)
	}
	logV, err := checkpoint.ParseVerifierKey(mlKey)
	if err != nil {
		t.Fatal(err)
	}
	mirrorV, err := checkpoint.ParseCosignerKey(l.mirrorMLDSA44)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(b, note.VerifierList(logV, mirrorV))
	if err != nil || len(n.Sigs) != 2 {
		t.Fatalf("Sunlight's mirror checkpoint: %v\n%s", err, b)
	}
	if got, err := checkpoint.Parse([]byte(n.Text)); err != nil || got.Size < cp.Size {
		t.Fatalf("Sunlight's mirror checkpoint is of size %d (%v), want at least %d", got.Size, err, cp.Size)
	}
}
