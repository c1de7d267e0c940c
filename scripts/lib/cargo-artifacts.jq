# cargo's JSON messages (`--message-format=json`) to the shell assignments
# scripts/ws-build.sh prints: bin_NAME, test_CRATE__NAME, bssl_*.
def crate: (.package_id | split("#") | last) as $frag
  | (if ($frag | contains("@")) then ($frag | split("@") | first)
     else (.package_id | split("#") | first | split("/") | last) end) | gsub("-"; "_");
def q: "'" + gsub("'"; "'\\''") + "'";
[ inputs
  | if .reason == "compiler-artifact" then
      .target as $t | (.target.name | gsub("-"; "_")) as $n
      | if .executable == null then
          if (.package_id | contains("#boring-sys@")) and $t.kind == ["lib"] then
            ["bssl_version", (.package_id | split("@") | last)],
            ["bssl_features", (.features | join(","))]
          else empty end
        elif $t.kind == ["bin"] and (.profile.test | not) then ["bin_" + $n, .executable]
        elif $t.kind == ["test"] then ["test_\(crate)__\($n)", .executable]
        elif .profile.test and ($t.kind[0] == "lib" or $t.kind[0] == "rlib") then ["test_\(crate)__lib", .executable]
        elif .profile.test and $t.kind == ["bin"] then ["test_\(crate)__bin_\($n)", .executable]
        else empty end
    elif .reason == "build-script-executed" and (.package_id | contains("#boring-sys@")) then
      ["bssl_out", .out_dir]
    else empty end ]
| map({key: .[0], value: .[1]}) | from_entries | to_entries | sort_by(.key)
| .[] | "\(.key)=\(.value | q)"
