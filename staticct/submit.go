package staticct

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mosaic-ct/mosaic/internal/base/fastecdsa"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
)

// appendAddChainRequest appends the RFC 6962 §4.1 add-chain (and §4.2
// add-pre-chain) request body, {"chain":["BASE64",...]}, byte for byte what
// encoding/json gives for a struct whose Chain [][]byte field is tagged
// "chain": standard base64 needs no escaping in a JSON string.
func appendAddChainRequest(b []byte, chain [][]byte) []byte {
	b = append(b, `{"chain":[`...)
	for i, der := range chain {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, der)
		b = append(b, '"')
	}
	return append(b, "]}"...)
}

// AddChain submits a certificate chain (DER, leaf first) to add-chain and
// returns the log's SCT response. The SCT is not verified: see VerifySCT.
// Errors are *FetchError wrapping an *HTTPError (with RetryAfter set on
// pushback), a network error, or a context error; a 200 answer that is not
// an SCT response is a *VerifyError. Use Classify and Describe.
func (c *Client) AddChain(ctx context.Context, chain [][]byte) (*SCTResponse, error) {
	return c.submit(ctx, "ct/v1/add-chain", chain)
}

// AddPreChain submits a precertificate chain to add-pre-chain.
func (c *Client) AddPreChain(ctx context.Context, chain [][]byte) (*SCTResponse, error) {
	return c.submit(ctx, "ct/v1/add-pre-chain", chain)
}

func (c *Client) submit(ctx context.Context, endpoint string, chain [][]byte) (*sct.Response, error) {
	if c.submission == "" {
		return nil, errors.New("client has no submission prefix")
	}
	n := len(`{"chain":[]}`)
	for _, der := range chain {
		n += base64.StdEncoding.EncodedLen(len(der)) + 3
	}
	body := appendAddChainRequest(make([]byte, 0, n), chain)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.submission+endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	b, err := c.do(req, maxResponseSize)
	if err != nil {
		return nil, &FetchError{Path: endpoint, Err: err}
	}
	var resp sct.Response
	if err := json.Unmarshal(b, &resp); err != nil {
		// The log said 200 (logged) but gave no usable SCT: that is the
		// log misbehaving, not failing to answer.
		return nil, &VerifyError{Kind: VerifySCT, Err: fmt.Errorf("%s answered 200 with a malformed SCT response: %v", endpoint, err)}
	}
	return &resp, nil
}

// VerifySCT checks an SCT response's signature and leaf_index extension
// against the entry the submitter expects the log to have built from its
// chain (Timestamp and LeafIndex are taken from the response), and returns
// the leaf index. Failures are *VerifyError of kind VerifySCT.
func (c *Client) VerifySCT(resp *SCTResponse, e Entry) (uint64, error) {
	if c.pub == nil {
		return 0, errNoKey
	}
	c.sctKeyOnce.Do(func() { c.sctKey, _ = fastecdsa.New(c.pub, nil) })
	var idx uint64
	var err error
	if c.sctKey != nil {
		idx, err = sct.VerifyKey(c.sctKey, c.logID, resp, e)
	} else {
		idx, err = sct.Verify(c.pub, c.logID, resp, e)
	}
	if err != nil {
		return 0, &VerifyError{Kind: VerifySCT, Err: err}
	}
	return idx, nil
}
