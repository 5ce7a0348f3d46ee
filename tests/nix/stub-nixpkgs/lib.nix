# The few nixpkgs.lib functions the flake uses, with the same meaning.
let
  genAttrs =
    names: f:
    builtins.listToAttrs (
      map (name: {
        inherit name;
        value = f name;
      }) names
    );
in
{
  inherit genAttrs;

  importTOML = path: builtins.fromTOML (builtins.readFile path);

  makeBinPath = pkgs: builtins.concatStringsSep ":" (map (p: "${p}/bin") pkgs);

  # A file set is modelled as a list of existing paths; toSource checks that
  # every member exists below root and returns root itself.
  fileset = {
    unions = sets: builtins.concatLists (map (s: if builtins.isList s then s else [ s ]) sets);
    maybeMissing = path: if builtins.pathExists path then [ path ] else [ ];
    toSource =
      { root, fileset }:
      let
        members = if builtins.isList fileset then fileset else [ fileset ];
        missing = builtins.filter (p: !builtins.pathExists p) members;
        rootStr = toString root;
        outside = builtins.filter (
          p: builtins.substring 0 (builtins.stringLength rootStr) (toString p) != rootStr
        ) members;
      in
      if missing != [ ] then
        throw "lib.fileset.toSource: missing ${toString missing}"
      else if outside != [ ] then
        throw "lib.fileset.toSource: outside root: ${toString outside}"
      else
        root;
  };

  licenses = {
    mit = {
      spdxId = "MIT";
    };
    asl20 = {
      spdxId = "Apache-2.0";
    };
  };

  platforms = {
    linux = [
      "x86_64-linux"
      "aarch64-linux"
    ];
    unix = [
      "x86_64-linux"
      "aarch64-linux"
      "x86_64-darwin"
      "aarch64-darwin"
    ];
  };
}
