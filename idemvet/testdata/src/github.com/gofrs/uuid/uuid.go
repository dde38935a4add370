package uuid

type UUID [16]byte

func NewV4() (UUID, error)              { return UUID{}, nil }
func Must(u UUID, err error) UUID       { return u }
func FromString(s string) (UUID, error) { return UUID{}, nil }
func (u UUID) String() string           { return "" }
