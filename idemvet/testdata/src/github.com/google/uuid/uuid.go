package uuid

type UUID [16]byte

func New() UUID                    { return UUID{} }
func NewString() string            { return "" }
func NewRandom() (UUID, error)     { return UUID{}, nil }
func NewV7() (UUID, error)         { return UUID{}, nil }
func Must(u UUID, err error) UUID  { return u }
func Parse(s string) (UUID, error) { return UUID{}, nil }
func MustParse(s string) UUID      { return UUID{} }
func (u UUID) String() string      { return "" }
