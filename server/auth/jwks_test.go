package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// TestJWKSParsing: the key sets an issuer or client publishes are read
// strictly from files and leniently from URLs; unsafe keys never load.
func TestJWKSParsing(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwk := func(kid string, k any) JWK {
		j, err := PublicJWK(kid, k)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	good, ec, weak := jwk("r", &rk.PublicKey), jwk("e", &ek.PublicKey), jwk("w", &small.PublicKey)
	offCurve := ec
	offCurve.Kid = "off"
	offCurve.Y = base64.RawURLEncoding.EncodeToString(append(make([]byte, 31), 7))
	enc := good
	enc.Kid, enc.Use = "enc", "enc"
	okp := JWK{Kty: "OKP", Kid: "ed", Crv: "Ed25519", X: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
	set := func(keys ...JWK) []byte {
		b, _ := json.Marshal(JWKS{Keys: keys})
		return b
	}
	for _, tc := range []struct {
		name    string
		body    []byte
		strict  bool
		wantErr string
		kids    []string
	}{
		{"RSA and EC keys load", set(good, ec), true, "", []string{"r", "e"}},
		{"encryption keys are skipped", set(good, enc), true, "", []string{"r"}},
		{"an RSA key under 2048 bits fails a file", set(good, weak), true, "2048", nil},
		{"an EC point off the curve fails a file", set(good, offCurve), true, "bad EC point", nil},
		{"an unsupported key type fails a file", set(good, okp), true, "unsupported key type", nil},
		{"a provider's unusable keys are skipped", set(good, weak, offCurve, okp), false, "", []string{"r"}},
		{"two keys of one kid fail a file", set(good, good), true, "two keys", nil},
		{"a set without usable keys fails", set(weak), false, "no signing keys", nil},
		{"a set that is not JSON fails", []byte("<html>"), false, "not JSON", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := parseJWKS(tc.body, tc.strict)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one about %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != len(tc.kids) {
				t.Fatalf("%d keys, want %v", len(keys), tc.kids)
			}
			for _, kid := range tc.kids {
				if _, err := keys.Key(context.Background(), kid); err != nil {
					t.Fatalf("kid %s: %v", kid, err)
				}
			}
		})
	}
	t.Run("a token without kid uses the only key", func(t *testing.T) {
		keys, _ := ParseJWKS(set(good))
		if _, err := keys.Key(context.Background(), ""); err != nil {
			t.Fatal(err)
		}
		keys, _ = ParseJWKS(set(good, ec))
		if _, err := keys.Key(context.Background(), ""); err == nil {
			t.Fatal("a token without kid picked one of two keys")
		}
	})
}

// TestClientSecretHashes: a secret matches its own hash only; malformed
// or foreign hashes never match.
func TestClientSecretHashes(t *testing.T) {
	secret := NewClientSecret()
	hash, err := HashSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(hash, secret) || !strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q", hash)
	}
	again, _ := HashSecret(secret)
	for _, tc := range []struct {
		name, hash, secret string
		want               bool
	}{
		{"the secret matches", hash, secret, true},
		{"a second hash of it (another salt) matches", again, secret, true},
		{"another secret does not", hash, secret + "x", false},
		{"an empty secret does not", hash, "", false},
		{"an empty hash matches nothing", "", "", false},
		{"a bcrypt hash is not accepted", "$2a$10$abcdefghijklmnopqrstuu", secret, false},
		{"absurd parameters are refused", strings.Replace(hash, "m=19456", "m=99999999", 1), secret, false},
	} {
		if got := CheckSecret(tc.hash, tc.secret); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if hash == again {
		t.Fatal("two hashes of one secret are equal: no salt")
	}
}
