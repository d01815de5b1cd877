package eager

import (
	"testing"

	"github.com/starwire/starwire/internal/testwait"
)

func TestMain(m *testing.M) { testwait.VerifyTestMain(m) }
