package devmode

import (
	"fmt"

	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/process/config"
	"github.com/mosaic-ct/mosaic/staticct"
)

// WitnessKeyFile is the dev witness's seed (`mosaic serve -dev -witness`)
// in the directory.
const WitnessKeyFile = "witness.key"

// AddWitness adds to the dev config c (loaded from dir) a witness of the
// dev log (c2sp.org/tlog-witness), served by the same process under
// <submission prefix>witness/, and makes the log ask it for Ed25519 and
// ML-DSA-44 cosignatures. The witness's seed is created in dir the first
// time. It returns what dev.json says of the witness.
func AddWitness(dir string, c *config.Config) (*staticct.DevWitness, error) {
	w, err := newDevCosigner(dir, c, "witness")
	if err != nil {
		return nil, err
	}
	c.Witness = &config.WitnessServer{
		Name:             w.name,
		Key:              w.keyPath,
		SubmissionPrefix: w.prefix,
		Logs: []config.WitnessedLog{{
			Origin: w.origin,
			Keys:   ctlog.Identity{Origin: w.origin, Keys: w.logKeys}.VerifierKeys(),
		}},
	}
	quorum := 1
	w.log.Witnesses = &config.Witnesses{Quorum: &quorum, List: []config.Witness{{Name: "dev-witness", URL: w.prefix, Keys: w.vkeys}}}
	c.SetAddedDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("the dev witness's config: %w", err)
	}
	return &staticct.DevWitness{URL: w.prefix, VKey: w.vkeys[len(w.vkeys)-1], VKeys: w.vkeys}, nil
}
