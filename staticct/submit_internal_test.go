package staticct

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestAppendAddChainRequest: the hand-written body is encoding/json's.
func TestAppendAddChainRequest(t *testing.T) {
	type request struct {
		Chain [][]byte `json:"chain"`
	}
	for _, chain := range [][][]byte{
		nil,
		{},
		{{}},
		{{0}},
		{{0xfb, 0xff, 0xfe}, {1, 2}, bytes.Repeat([]byte{0x3e, 0x3f, 0xff}, 700)}, // '+', '/' and '=' in the base64
	} {
		want, err := json.Marshal(request{Chain: chain})
		if err != nil {
			t.Fatal(err)
		}
		if chain == nil {
			want = []byte(`{"chain":[]}`) // a nil slice would be null; submit never sends one
		}
		if got := appendAddChainRequest(nil, chain); !bytes.Equal(got, want) {
			t.Errorf("chain %x:\n got %s\nwant %s", chain, got, want)
		}
	}
}

// BenchmarkAddChainBody compares the request body's encoding with
// encoding/json's, for a typical three-certificate chain.
func BenchmarkAddChainBody(b *testing.B) {
	chain := [][]byte{bytes.Repeat([]byte{1}, 700), bytes.Repeat([]byte{2}, 600), bytes.Repeat([]byte{3}, 550)}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(struct {
				Chain [][]byte `json:"chain"`
			}{chain})
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			appendAddChainRequest(make([]byte, 0, 2600), chain)
		}
	})
}
