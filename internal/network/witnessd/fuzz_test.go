package witnessd

import "testing"

// FuzzParseLogList: a witness-network log list, which a witness may fetch
// from a URL it does not control, never panics, and whatever it yields is
// usable as is: each log has one vkey that parses and is named by its
// origin, and no origin twice.
func FuzzParseLogList(f *testing.F) {
	vkey := newTestLog(f, "example.com/a").vkey
	f.Add([]byte("logs/v0\nvkey " + vkey + "\norigin example.com/a\n"))
	f.Add([]byte("# c\nlogs/v0\n\nvkey " + vkey + "\nqpd 1\nvkey x\n"))
	f.Add([]byte("logs/v0\norigin a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		logs, _, err := ParseLogList(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, l := range logs {
			if len(l.Keys) != 1 || seen[l.Origin] {
				t.Fatalf("%q: entry %+v", data, l)
			}
			seen[l.Origin] = true
			if _, err := newLog(l); err != nil {
				t.Fatalf("%q: an entry the witness cannot use: %v", data, err)
			}
		}
	})
}
