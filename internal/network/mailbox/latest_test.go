package mailbox

import "testing"

// TestLatest: Publish never blocks and keeps only the newest checkpoint,
// Wake is signalled once for any number of Publishes, and Take empties
// the mailbox.
func TestLatest(t *testing.T) {
	l := NewLatest()
	if l.Take() != nil {
		t.Fatal("a new mailbox gave a checkpoint")
	}
	for _, s := range []string{"a", "b", "c"} {
		l.Publish([]byte(s)) // must not block although nobody takes
	}
	select {
	case <-l.Wake():
	default:
		t.Fatal("Wake was not signalled after Publish")
	}
	select {
	case <-l.Wake():
		t.Fatal("Wake was signalled twice for one wait")
	default:
	}
	if got := l.Take(); string(got) != "c" {
		t.Fatalf("Take = %q, want the newest, %q", got, "c")
	}
	if got := l.Take(); got != nil {
		t.Fatalf("Take gave %q twice", got)
	}
}
