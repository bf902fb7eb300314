package staticct

import (
	"github.com/mosaic-ct/mosaic/internal/base/buildinfo"
)

// ProjectURL is the contact URL in Mosaic's User-Agent strings, so that a
// log operator who sees the traffic knows where it comes from.
const ProjectURL = "https://github.com/mosaic-ct/mosaic"

// UserAgent returns the User-Agent of a Mosaic tool: "PRODUCT/VERSION
// (+https://github.com/mosaic-ct/mosaic)". Logs such as Sunlight throttle
// clients that do not identify themselves with a contact; this one does.
// VERSION is the main module's version from the build information, or
// "devel" for a build from a working tree.
func UserAgent(product string) string {
	return product + "/" + Version() + " (+" + ProjectURL + ")"
}

// Version returns the main module's version, or "devel" (see package
// buildinfo, which `mosaic version` and mosaic_build_info use too).
func Version() string { return buildinfo.Version() }
