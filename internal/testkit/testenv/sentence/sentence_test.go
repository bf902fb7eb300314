package sentence

import "testing"

func TestCheck(t *testing.T) {
	for _, s := range []string{
		"The chain is empty.",
		"The certificate at chain[1] did not sign the one at chain[0]: the signature does not verify.",
		"The leaf's NotAfter 2024-12-31T23:59:59Z is before the log's not_after_start 2025-01-01T00:00:00Z.",
	} {
		if err := Check(s); err != nil {
			t.Errorf("Check(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{
		"",
		"the chain is empty.",
		"The chain is empty",
		"The chain\nis empty.",
		"Bad: asn1: structure error: tags don't match (16 vs {class:0 tag:2}).",
		"Bad: json: cannot unmarshal number into Go value of type []string.",
		"Bad: x509: ECDSA verification failure.",
		"Bad \xff byte.",
		"Bad %!d(string=x).",
	} {
		if err := Check(s); err == nil {
			t.Errorf("Check(%q) = nil, want an error", s)
		}
	}
}
