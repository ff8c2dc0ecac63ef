function (newDoc, oldDoc, userCtx, secObj) {
  // The rules of a users database's documents, as Recliner enforces them
  // before any function runs (auth::users::validate): this function says
  // the same, for clients that read it, and judges writes only if an
  // admin changes it.
  function refuse(reason) {
    throw ({forbidden: reason});
  }
  function listed(group) {
    var names = (group && group.names) || [];
    var roles = (group && group.roles) || [];
    if (userCtx.name !== null && names.indexOf(userCtx.name) !== -1) {
      return true;
    }
    for (var i = 0; i < userCtx.roles.length; i++) {
      if (roles.indexOf(userCtx.roles[i]) !== -1) {
        return true;
      }
    }
    return false;
  }
  var isAdmin = userCtx.roles.indexOf('_admin') !== -1 ||
    listed(secObj && secObj.admins);

  if (newDoc._deleted === true) {
    var owner = oldDoc ? oldDoc.name : undefined;
    if (isAdmin || (userCtx.name !== null && userCtx.name === owner)) {
      return;
    }
    refuse('Only admins may delete other user docs.');
  }
  if (newDoc.type !== 'user') {
    refuse('doc.type must be user');
  }
  var name = newDoc.name;
  if (name === undefined || name === null || name === false || name === '') {
    refuse('doc.name is required');
  }
  if (typeof name !== 'string') {
    refuse('Doc ID must be of the form org.couchdb.user:name');
  }
  if (newDoc.roles === undefined || newDoc.roles === null) {
    refuse('doc.roles must exist');
  }
  if (!Array.isArray(newDoc.roles)) {
    refuse('doc.roles must be an array');
  }
  for (var r = 0; r < newDoc.roles.length; r++) {
    if (typeof newDoc.roles[r] !== 'string') {
      refuse('doc.roles can only contain strings');
    }
  }
  if (newDoc._id !== 'org.couchdb.user:' + name) {
    refuse('Doc ID must be of the form org.couchdb.user:name');
  }
  if (oldDoc && oldDoc.name !== name) {
    refuse('Usernames can not be changed.');
  }
  if (newDoc.hasOwnProperty('password_sha') && !newDoc.hasOwnProperty('salt')) {
    refuse('Users with password_sha must have a salt.' +
      'See /_utils/script/couch.js for example code.');
  }
  if (newDoc.hasOwnProperty('password_scheme')) {
    var scheme = typeof newDoc.password_scheme === 'string' ? newDoc.password_scheme : '';
    if (['simple', 'pbkdf2', 'simple+pbkdf2'].indexOf(scheme) === -1) {
      refuse('Password scheme `' + scheme + '` not supported.');
    }
    if (scheme === 'pbkdf2') {
      if (typeof newDoc.iterations !== 'number') {
        refuse('iterations must be a number.');
      }
      if (typeof newDoc.derived_key !== 'string') {
        refuse('derived_key must be a string.');
      }
    }
  }
  if (!isAdmin) {
    if (oldDoc) {
      if (userCtx.name !== name) {
        refuse('You may only update your own user document.');
      }
      var before = (Array.isArray(oldDoc.roles) ? oldDoc.roles : [])
        .filter(function (role) { return typeof role === 'string'; })
        .sort();
      var after = newDoc.roles.slice().sort();
      if (before.length !== after.length || before.some(function (role, i) {
        return role !== after[i];
      })) {
        refuse('Only _admin may edit roles');
      }
    } else if (newDoc.roles.length > 0) {
      refuse('Only _admin may set roles');
    }
  }
  for (var s = 0; s < newDoc.roles.length; s++) {
    var role = newDoc.roles[s];
    if (role !== '_metrics' && role.charAt(0) === '_') {
      refuse('No system roles (starting with underscore) in users db.');
    }
  }
  if (name.charAt(0) === '_') {
    refuse('Username may not start with underscore.');
  }
  if (name.indexOf(':') !== -1) {
    refuse('Character `:` is not allowed in usernames.');
  }
}
